# One image for every process of the service; the process is chosen by the command:
#
#   api (default)   bun src/server.ts
#   workers         bun workers/send.ts      bun workers/finalize.ts
#                   bun workers/status.ts    bun workers/maintenance.ts
#   simulator       bun src/simulator/server.ts
#   migrations      bun src/cli/index.ts db migrate
#   operator CLI    bun src/cli/index.ts <command> (DESIGN §5)
#
# Nothing is bundled: Bun runs the TypeScript sources, which read sql/ and src/redis/scripts/*.lua
# at run time (paths relative to the source files). See docs/operations.md.

ARG BUN_IMAGE=oven/bun:1.4.5-slim

# --- dependencies: production packages only, exactly as bun.lock pins them ---------------------
FROM ${BUN_IMAGE} AS deps
WORKDIR /app
COPY package.json bun.lock ./
RUN bun install --frozen-lockfile --production

# --- runtime -------------------------------------------------------------------------------------
FROM ${BUN_IMAGE} AS runtime
WORKDIR /app
# Not development: every process refuses to start without its secrets (docs/operations.md,
# "Required production variables").
ENV NODE_ENV=production

# Root-owned and read-only for the process: it writes nothing to disk (logs go to stdout).
COPY --from=deps /app/node_modules ./node_modules
COPY package.json bun.lock tsconfig.json ./
COPY sql ./sql
COPY src ./src
COPY workers ./workers

# The `bun` user (uid 1000) comes with the official image.
USER bun

EXPOSE 3000

# For the api (PORT, default 3000). Compose replaces it for the simulator and turns it off for
# the workers and the migrate job, which serve no HTTP.
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz', { signal: AbortSignal.timeout(2000) }).then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]

CMD ["bun", "src/server.ts"]
