# Quarry on Node 20 (Debian bookworm). Build: docker build -t quarry .  Run: docker run -p 8000:8000 quarry
# Settings are read from /app/settings.yaml (mount your own over it); embedded data lives in /app/data.
FROM node:20-bookworm-slim

ENV NODE_ENV=production \
    PORT=8000 \
    DATA_DIR=/app/data

WORKDIR /app

# Native modules (uWebSockets.js, usearch, @ohah/hwpjs) ship prebuilt binaries for glibc x64/arm64;
# python3, make and g++ cover a rebuild where one is missing.
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ ca-certificates curl \
 && rm -rf /var/lib/apt/lists/*

COPY package.json package-lock.json ./
# npm install runs it (postinstall): it mends two faults of the PostgreSQL driver (adapters/postgres-driver-patch.mjs).
COPY adapters/postgres-driver-patch.mjs ./adapters/
# esbuild (with tsx, which runs the sources where no build can be made) is a runtime dependency; dev dependencies are left out.
# npm install (not npm ci): @ohah/hwpjs names optional platform builds that are not published, which
# `npm ci` reports as a lock-file mismatch; install uses the locked versions all the same.
RUN npm install --omit=dev --no-audit --no-fund && npm cache clean --force

COPY kernel ./kernel
COPY plugins ./plugins
COPY compute ./compute
COPY adapters ./adapters
COPY tsconfig.json settings.example.yaml ./
# The service and the compute pool's tasks compiled to JavaScript ahead (kernel/compiled.mjs): npm start runs them
# without tsx (kernel/run.mjs).
RUN node -e "import('./kernel/compiled.mjs').then(async (m) => process.exit(m.compiledTasks() === null || (await m.compiledEntry('kernel/main.ts')) === null ? 1 : 0))" \
 && cp settings.example.yaml /app/settings.yaml \
 && mkdir -p /app/data \
 && chown -R node:node /app

USER node
EXPOSE 8000
VOLUME ["/app/data"]

HEALTHCHECK --interval=15s --timeout=5s --start-period=30s --retries=3 \
  CMD curl -fsS "http://127.0.0.1:${PORT}/health" || exit 1

CMD ["npm", "start"]
