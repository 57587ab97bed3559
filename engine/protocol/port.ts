/**
 * The handshake of the per-worker port (see messages.ts). Kept apart from the
 * message schemas so the engine can start its worker pool before it loads
 * zod (Engine.open overlaps the two).
 */

/** Key of the message a worker posts on startup to hand its port to the engine. */
export const PORT_HANDSHAKE = 'sluice.port/1';
