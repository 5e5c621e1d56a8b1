# syntax=docker/dockerfile:1
# agent-dispatch: one image for every role (start, worker, poller, serve, enqueue, simulate).

# --- build: compile TypeScript with the dev dependencies -------------------------------------------
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# `prepare` would build before the sources are here; the build runs below, once they are.
RUN npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# --- runtime: production dependencies and the compiled output only ---------------------------------
FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HTTP_PORT=3000 \
    HTTP_HOST=0.0.0.0
WORKDIR /app
COPY --chown=node:node package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force
COPY --from=build --chown=node:node /app/dist ./dist
# The demo producer enqueues these; tiny, and handy for a first run of any deployment.
COPY --chown=node:node examples ./examples
USER node
EXPOSE 3000
# Meaningful for the roles that serve HTTP (start, serve); compose turns it off for the others.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:' + (process.env.HTTP_PORT || 3000) + '/healthz').then((r) => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
ENTRYPOINT ["node", "dist/cli.js"]
# No key is baked in: `start` with REDIS_URL and no AGENT_API_KEY exits 2 naming it, and uses the
# bundled simulator only when told so (`start --simulator`).
CMD ["start"]
