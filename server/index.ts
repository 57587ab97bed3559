/**
 * The HTTP API of `sluice serve`, for embedders that serve an engine of their
 * own. See docs/http.md.
 */
export { bearerMatches, loadOrCreateToken, type ServerToken, TOKEN_FILE } from './auth.js';
export { HTTP_STATUS } from './http.js';
export { MAX_WAIT_SECONDS } from './routes.js';
export { DEFAULT_HOST, DEFAULT_PORT, type ServerOptions, SluiceServer, startServer } from './server.js';
export type { SseEventName } from './tracker.js';
