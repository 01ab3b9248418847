// Invite and role-grant e-mails (spec 5, smtp settings): sent over SMTP in the background. Sending never
// blocks or fails the request that caused it (notes.md): a failure is logged and the membership or invite
// stays. The SMTP client (nodemailer) is loaded at the first message, so a deployment that never invites
// does not pay for it.
import type { Transporter } from 'nodemailer'
import type { Settings } from '../../kernel/config/schema.ts'
import type { Logger } from '../../kernel/log.ts'
import type { Role } from './types.ts'

export interface MailMessage {
  to: string
  subject: string
  text: string
}

export interface Mailer {
  /** Queues the message and returns at once. */
  send(message: MailMessage): void
  /** Waits (at most CLOSE_WAIT_MS) for messages in flight, then closes the connection pool. */
  close(): Promise<void>
}

export interface InviteMail {
  to: string
  kbId: string
  kbName: string
  role: Role
  invitedBy: string
  expiresAt: string
}

export interface GrantMail {
  to: string
  kbId: string
  kbName: string
  role: Role
  grantedBy: string
}

const CLOSE_WAIT_MS = 5_000

const kbLabel = (kbId: string, kbName: string) => (kbName && kbName !== kbId ? `"${kbName}" (${kbId})` : kbId)

export const inviteMessage = (m: InviteMail): MailMessage => ({
  to: m.to,
  subject: `Invitation to knowledge base ${m.kbId}`,
  text: [
    `${m.invitedBy} invited you to the knowledge base ${kbLabel(m.kbId, m.kbName)} as ${m.role}.`,
    '',
    `Sign in with this e-mail address (${m.to}) before ${m.expiresAt} to accept: the invitation becomes your membership at your first request.`,
  ].join('\n'),
})

export const grantMessage = (m: GrantMail): MailMessage => ({
  to: m.to,
  subject: `Role ${m.role} on knowledge base ${m.kbId}`,
  text: `${m.grantedBy} granted you the role ${m.role} on the knowledge base ${kbLabel(m.kbId, m.kbName)}.`,
})

export function createMailer(smtp: Readonly<Settings['smtp']>, log: Logger): Mailer {
  let transport: Promise<Transporter> | null = null
  const inFlight = new Set<Promise<void>>()

  const open = () => (transport ??= import('nodemailer').then(({ createTransport }) => createTransport({
    host: smtp.host,
    port: smtp.port,
    // Port 465 speaks TLS from the first byte; any other port upgrades with STARTTLS when the server offers it.
    secure: smtp.port === 465,
    auth: smtp.username ? { user: smtp.username, pass: smtp.password } : undefined,
    pool: true,
    connectionTimeout: 10_000,
    greetingTimeout: 10_000,
    socketTimeout: 30_000,
  })))

  return {
    send(message) {
      const sending = open()
        // An address object: nodemailer takes it as one address, never parses it as a list.
        .then((t) => t.sendMail({ from: smtp.from_address, to: { name: '', address: message.to }, subject: message.subject, text: message.text }))
        .then(
          () => log.debug({ to: message.to, subject: message.subject }, 'e-mail sent'),
          (err: unknown) => log.warn({ to: message.to, subject: message.subject, err: (err as Error).message }, 'e-mail not sent'),
        )
        .finally(() => inFlight.delete(sending))
      inFlight.add(sending)
    },
    async close() {
      // A hung server must not hold shutdown for the client's whole socket timeout: what is left is dropped.
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        Promise.allSettled([...inFlight]),
        new Promise((resolve) => { timer = setTimeout(resolve, CLOSE_WAIT_MS) }),
      ])
      clearTimeout(timer)
      if (transport) (await transport).close()
    },
  }
}
