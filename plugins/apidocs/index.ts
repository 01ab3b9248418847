// /openapi.json, /docs (Swagger UI) and /redoc, served from locally installed packages: no CDN, works offline.
import { readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { definePlugin, rawReply } from '../../kernel/plugin.ts'
import { buildOpenApi } from '../../kernel/openapi.ts'

const require = createRequire(import.meta.url)
const swaggerDir = dirname(require.resolve('swagger-ui-dist/package.json'))
const redocBundle = join(dirname(require.resolve('redoc/package.json')), 'bundles', 'redoc.standalone.js')
const version = (require('../../package.json') as { version: string }).version

const ASSETS: Record<string, { file: string; type: string }> = {
  'swagger-ui.css': { file: join(swaggerDir, 'swagger-ui.css'), type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { file: join(swaggerDir, 'swagger-ui-bundle.js'), type: 'text/javascript; charset=utf-8' },
  'swagger-ui-standalone-preset.js': { file: join(swaggerDir, 'swagger-ui-standalone-preset.js'), type: 'text/javascript; charset=utf-8' },
  'favicon-32x32.png': { file: join(swaggerDir, 'favicon-32x32.png'), type: 'image/png' },
  'redoc.standalone.js': { file: redocBundle, type: 'text/javascript; charset=utf-8' },
}

const SWAGGER_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Quarry API</title>
<link rel="icon" type="image/png" href="/docs/static/favicon-32x32.png">
<link rel="stylesheet" href="/docs/static/swagger-ui.css"></head>
<body><div id="swagger-ui"></div>
<script src="/docs/static/swagger-ui-bundle.js"></script>
<script src="/docs/static/swagger-ui-standalone-preset.js"></script>
<script>window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#swagger-ui', deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset], layout: 'BaseLayout' })</script>
</body></html>`

const REDOC_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Quarry API - ReDoc</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><redoc spec-url="/openapi.json"></redoc>
<script src="/docs/static/redoc.standalone.js"></script></body></html>`

export default definePlugin({
  name: 'apidocs',
  register(ctx) {
    const tags = ['api-description']
    const cache = new Map<string, Buffer>()
    let openapi: string | null = null
    const html = 'text/html; charset=utf-8'

    ctx.route({
      method: 'GET', path: '/openapi.json', summary: 'OpenAPI 3.1 description', tags, access: { level: 'public' },
      responses: { 200: { description: 'The API description' } },
      handler: () => {
        openapi ??= JSON.stringify(buildOpenApi(ctx.routes(), {
          title: 'Quarry', version,
          description: 'Knowledge-base retrieval service: knowledge bases, documents, connectors, hybrid search, MCP.',
        }, { authRequired: ctx.settings.oidc.issuer_url !== '' }))
        return rawReply(200, openapi, 'application/json')
      },
    })
    ctx.route({
      method: 'GET', path: '/docs', summary: 'Swagger UI', tags, access: { level: 'public' }, hidden: true,
      handler: () => rawReply(200, SWAGGER_HTML, html),
    })
    ctx.route({
      method: 'GET', path: '/redoc', summary: 'ReDoc', tags, access: { level: 'public' }, hidden: true,
      handler: () => rawReply(200, REDOC_HTML, html),
    })
    ctx.route({
      method: 'GET', path: '/docs/static/{file}', summary: 'API page assets', tags, access: { level: 'public' }, hidden: true,
      handler: (req) => {
        const asset = ASSETS[req.params.file]
        if (!asset) return rawReply(404, JSON.stringify({ detail: 'Not Found' }), 'application/json')
        let body = cache.get(req.params.file)
        if (!body) cache.set(req.params.file, (body = readFileSync(asset.file)))
        return rawReply(200, body, asset.type, { 'cache-control': 'public, max-age=86400' })
      },
    })
  },
})
