#!/usr/bin/env node
// The `quarry` command (package.json "bin"): the CLI is TypeScript, run through tsx as the rest of the project is.
import { register } from 'tsx/esm/api'

register()
const { main } = await import('../cli/main.ts')
process.exitCode = await main(process.argv.slice(2))
