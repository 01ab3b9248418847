// The feature plugins the service loads, in no particular order: the kernel sorts them by dependsOn.
import type { Plugin } from './plugin.ts'
import apidocs from '../plugins/apidocs/index.ts'
import authz from '../plugins/authz/index.ts'
import connectors from '../plugins/connectors/index.ts'
import operatorConsole from '../plugins/console/index.ts'
import docs from '../plugins/docs/index.ts'
import health from '../plugins/health/index.ts'
import kb from '../plugins/kb/index.ts'
import limits from '../plugins/limits/index.ts'
import mcp from '../plugins/mcp/index.ts'
import metrics from '../plugins/metrics/index.ts'
import search from '../plugins/search/index.ts'
import transfer from '../plugins/transfer/index.ts'

export const defaultPlugins = (): Plugin<any>[] => [authz, health, kb, docs, connectors, search, mcp, metrics, apidocs, operatorConsole, limits, transfer]
