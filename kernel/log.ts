// Structured JSON logs (pino). Levels follow the settings' names (DEBUG, INFO, WARNING, ERROR).
import { pino, type Logger, type DestinationStream } from 'pino'

export type { Logger }

const LEVELS = { DEBUG: 'debug', INFO: 'info', WARNING: 'warn', ERROR: 'error' } as const

export function createLogger(level: keyof typeof LEVELS | 'SILENT' = 'INFO', destination?: DestinationStream): Logger {
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
