// A free TCP port on 127.0.0.1 for a child process to listen on (taken, then released at once).
import { createServer } from 'node:net'

export async function freePort(): Promise<number> {
  const srv = createServer()
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r))
  const port = (srv.address() as { port: number }).port
  await new Promise<void>((r) => srv.close(() => r()))
  return port
}
