// A real SMTP server in-process (smtp-server) that accepts every message and keeps it, so tests read the
// invite and role-grant e-mails the service really sent over the wire. Optionally requires AUTH PLAIN/LOGIN
// with one username and password; STARTTLS is not offered (the service's client would otherwise upgrade to a
// self-signed certificate it must not trust).
import type { AddressInfo } from 'node:net'
import { SMTPServer } from 'smtp-server'
import { waitFor } from './wait.ts'

export interface SmtpMessage {
  /** Envelope sender and recipients (MAIL FROM, RCPT TO). */
  from: string
  to: string[]
  /** The authenticated username, if any. */
  user: string | null
  /** Header names lower-cased, folded lines joined. */
  headers: Record<string, string>
  subject: string
  /** The body, decoded from quoted-printable or base64 when the message says so. */
  text: string
  raw: string
}

export interface SmtpSink {
  readonly host: string
  readonly port: number
  readonly messages: readonly SmtpMessage[]
  /** Waits until a message to `to` arrives whose subject or text contains `contains` (when given). */
  waitFor(to: string, contains?: string, timeoutMs?: number): Promise<SmtpMessage>
  /** Messages to `to` so far. */
  to(address: string): SmtpMessage[]
  close(): Promise<void>
}

function parse(raw: string, envelope: { from: string; to: string[]; user: string | null }): SmtpMessage {
  const split = raw.indexOf('\r\n\r\n')
  const head = split < 0 ? raw : raw.slice(0, split)
  const body = split < 0 ? '' : raw.slice(split + 4)
  const headers: Record<string, string> = {}
  for (const line of head.replace(/\r\n[ \t]+/g, ' ').split('\r\n')) {
    const i = line.indexOf(':')
    if (i > 0) headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim()
  }
  const encoding = (headers['content-transfer-encoding'] ?? '').toLowerCase()
  let text = body
  if (encoding === 'quoted-printable') {
    const bytes = Buffer.from(body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, h: string) => String.fromCharCode(parseInt(h, 16))), 'latin1')
    text = bytes.toString('utf8')
  } else if (encoding === 'base64') {
    text = Buffer.from(body, 'base64').toString('utf8')
  }
  return { ...envelope, headers, subject: headers.subject ?? '', text: text.replace(/\r\n/g, '\n').replace(/\n$/, ''), raw }
}

export async function startSmtpSink(opts: { username?: string; password?: string } = {}): Promise<SmtpSink> {
  const messages: SmtpMessage[] = []
  const server = new SMTPServer({
    disabledCommands: opts.username ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    authOptional: !opts.username,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === opts.username && auth.password === opts.password) return callback(null, { user: auth.username })
      callback(new Error('Invalid username or password'))
    },
    onData(stream, session, callback) {
      const chunks: Buffer[] = []
      stream.on('data', (c: Buffer) => chunks.push(c))
      stream.on('end', () => {
        messages.push(parse(Buffer.concat(chunks).toString('utf8'), {
          from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          to: session.envelope.rcptTo.map((r) => r.address),
          user: typeof session.user === 'string' ? session.user : null,
        }))
        callback()
      })
    },
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.server.address() as AddressInfo
  const to = (address: string) => messages.filter((m) => m.to.includes(address.toLowerCase()) || m.to.includes(address))
  return {
    host: '127.0.0.1',
    port,
    messages,
    to,
    waitFor: (address, contains, timeoutMs = 10_000) =>
      waitFor(async () => to(address).find((m) => !contains || m.subject.includes(contains) || m.text.includes(contains)), `an e-mail to ${address}`, timeoutMs),
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
