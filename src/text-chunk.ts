// A chunk of output text, below both the plan's writers (plan/byte-chunk.ts) and the CLI's
// output (cli/io.ts), which must not load plan/ to print `--help`.

/** A chunk of output text: a string, or UTF-8 bytes of whole characters (valid until the next chunk is asked for). */
export type TextChunk = string | Uint8Array;

const lenient = new TextDecoder();

/** A chunk's text: the string, or its bytes decoded. O(size). */
export const chunkText = (chunk: TextChunk): string => (typeof chunk === 'string' ? chunk : lenient.decode(chunk));
