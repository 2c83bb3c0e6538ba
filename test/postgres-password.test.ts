// A PostgreSQL role that needs a password, with none in the URL: node-postgres's own words were
// all the CLI said ("SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string"). The
// server here is a TEST DOUBLE of PostgreSQL's first answer to a client's startup message when
// pg_hba.conf says scram-sha-256: an AuthenticationSASL request naming SCRAM-SHA-256, then a
// SASLContinue (src/backend/libpq/auth.c, sendAuthRequest with AUTH_REQ_SASL = 10 and
// AUTH_REQ_SASL_CONT = 11); no other part of the protocol is spoken, as the client stops there.
import { existsSync, writeFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

let server: Server | undefined;
const sockets = new Set<Socket>();
afterEach(async () => {
  for (const s of sockets) s.destroy();
  sockets.clear();
  await new Promise((resolve) => (server === undefined ? resolve(undefined) : server.close(resolve)));
  server = undefined;
});

/** An authentication request (message 'R') with `code` and its data. */
function authRequest(code: number, data: Buffer): Buffer {
  const head = Buffer.alloc(9);
  head.write('R', 0, 'latin1');
  head.writeInt32BE(8 + data.length, 1);
  head.writeInt32BE(code, 5);
  return Buffer.concat([head, data]);
}

/**
 * Listens on a free port; answers a startup message with AuthenticationSASL (SCRAM-SHA-256) and
 * the client's first SCRAM message with AuthenticationSASLContinue (AUTH_REQ_SASL_CONT = 11,
 * a server-first-message), where a client without a password gives up.
 */
async function wantsPassword(): Promise<number> {
  server = createServer((socket) => {
    sockets.add(socket);
    let messages = 0;
    socket.on('data', () => {
      messages++;
      if (messages === 1) socket.write(authRequest(10, Buffer.from('SCRAM-SHA-256\0\0', 'latin1')));
      else if (messages === 2) socket.write(authRequest(11, Buffer.from('r=clientnonceservernonce,s=c2FsdA==,i=4096', 'latin1')));
    });
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
  return (server!.address() as { port: number }).port;
}

describe('a PostgreSQL role that wants a password the URL does not give', () => {
  it('says so and where to give it, exit 2, nothing written', async () => {
    const port = await wantsPassword();
    const dir = tempDir('rb-pg-password-');
    const prompts = join(dir, 'p.jsonl');
    writeFileSync(prompts, '{"id":"a"}\n');
    const saved = process.env.PGPASSWORD;
    delete process.env.PGPASSWORD;
    const run = await cli(['plan', '--prompts', prompts, '--state', `postgres://rb@127.0.0.1:${port}/db`, '--budget-rollouts', '8', '--out', join(dir, 'plan.json')]).finally(() => {
      if (saved !== undefined) process.env.PGPASSWORD = saved;
    });
    expect(run.code).toBe(2);
    expect(existsSync(join(dir, 'plan.json'))).toBe(false);
    expect(run.stderr).toBe(
      `rollout-budget: postgres://rb@127.0.0.1:${port}/db: cannot open the state database (SASL: SCRAM-SERVER-FIRST-MESSAGE: client password must be a string: ` +
        'the server wants a password for this role and none was given: put it in the URL (postgres://user:password@host/db) or in PGPASSWORD)\n',
    );
  });
});
