// Structured JSON logs (pino). Levels follow the settings' names (DEBUG, INFO, WARNING, ERROR).
import { pino, type Logger, type DestinationStream } from 'pino'

export type { Logger }

const LEVELS = { DEBUG: 'debug', INFO: 'info', WARNING: 'warn', ERROR: 'error' } as const

export type LogLevel = keyof typeof LEVELS

/** Whether `name` is one of the levels (DEBUG, INFO, WARNING, ERROR). */
export const isLogLevel = (name: string): name is LogLevel => Object.hasOwn(LEVELS, name)

export function createLogger(level: LogLevel | 'SILENT' = 'INFO', destination?: DestinationStream): Logger {
  return pino(
    {
      level: level === 'SILENT' ? 'silent' : LEVELS[level],
      base: { service: 'quarry' },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: ['*.password', '*.secret_key', '*.api_key', '*.authorization', 'headers.authorization'], censor: '***' },
    },
    destination ?? pino.destination({ sync: false }),
  )
}
