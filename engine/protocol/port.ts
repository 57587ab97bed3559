/** The handshake of the per-worker port, apart from the message schemas so that the pool starts before zod loads. */

/** Key of the message a worker posts on startup to hand its port to the engine. */
export const PORT_HANDSHAKE = 'sluice.port/1';
