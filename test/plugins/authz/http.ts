// Response assertions and request bodies shared by the authz suites that call the service with fetch.
import assert from 'node:assert/strict'

type Json = any

/** The parsed body, after asserting the status (the body is in the message when it differs). */
export const json = async (res: Response, status: number): Promise<Json> => {
  const text = await res.text()
  assert.equal(res.status, status, `HTTP ${res.status}: ${text}`)
  return text ? JSON.parse(text) : null
}
/** The status and the notes.md error body `{"detail": text}`. */
export const detail = async (res: Response, status: number, text: string) => assert.deepEqual(await json(res, status), { detail: text })
export const post = (body: unknown) => ({ method: 'POST', json: body })
export const patch = (body: unknown) => ({ method: 'PATCH', json: body })
