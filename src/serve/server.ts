// Internal: not exported from the package entry.
// `stoker serve`: a Unix-socket server that hands batches to another process (the PyTorch client in
// python/), one loader per connected client. The rule: the first line on stdout is one JSON object
// {"stoker": "serve", "socket", "pid"} — a parent reads it to connect — and everything the server
// has to say after that goes to stderr; with `once`, the server exits when its first client leaves
// (or, before any client came, when stdin closes: the parent died).

import { createServer, type Server, type Socket } from 'node:net';
import { lstatSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { Session, type SessionConfig } from './session.js';
import { describeCause, serveStopped } from '../errors.js';

export interface ServeOptions extends Omit<SessionConfig, 'log'> {
  /** Socket path; default a fresh one under the temp folder. */
  readonly socket?: string;
  /** Serve one client, then exit. */
  readonly once: boolean;
  readonly log?: (line: string) => void;
  /** Where the ready line goes (stdout). */
  readonly announce?: (line: string) => void;
}

/**
 * Serve until `signal` aborts (or, with `once`, until the first client leaves). An abort tells every
 * connected client why (ERR_SERVE_STOPPED, the abort's reason) and disconnects it: a stopped server
 * exits with clients connected, and each of them raises at its next batch.
 */
export async function serve(o: ServeOptions, signal?: AbortSignal): Promise<void> {
  const log = o.log ?? ((line: string) => process.stderr.write(`${line}\n`));
  const path = o.socket ?? join(tmpdir(), `stoker-${process.pid}-${randomBytes(4).toString('hex')}.sock`);
  removeStaleSocket(path);
  const sessions = new Set<Session>();
  let next = 0;
  const config: SessionConfig = { source: o.source, options: o.options, slots: o.slots, idleMs: o.idleMs, log };
  let finish!: () => void;
  const finished = new Promise<void>((r) => (finish = r));
  const server: Server = createServer((socket: Socket) => {
    if (o.once && next > 0) {
      socket.end(`${JSON.stringify({ op: 'error', code: 'ERR_PROTOCOL', message: 'stoker serve --once: already serving a client' })}\n`);
      return;
    }
    const session = new Session(next++, socket, config);
    sessions.add(session);
    void session.done.then(() => {
      sessions.delete(session);
      if (o.once) finish();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  (o.announce ?? ((line) => process.stdout.write(`${line}\n`)))(JSON.stringify({ stoker: 'serve', socket: path, pid: process.pid }));
  const onStdinEnd = () => {
    if (next === 0) finish();
  };
  if (o.once && !process.stdin.isTTY) {
    process.stdin.on('end', onStdinEnd).on('error', onStdinEnd).resume();
  }
  const onAbort = () => finish();
  signal?.addEventListener('abort', onAbort, { once: true });
  try {
    await finished;
  } finally {
    signal?.removeEventListener('abort', onAbort);
    process.stdin.off('end', onStdinEnd).off('error', onStdinEnd);
    if (o.once && !process.stdin.isTTY) process.stdin.pause();
    // `close` stops new connections at once but calls back only once every open one has ended: the
    // clients are let go first, or a stopped server would wait for them to leave of their own accord.
    const closed = new Promise<void>((r) => server.close(() => r()));
    const why = signal?.aborted === true ? serveStopped(typeof signal.reason === 'string' ? signal.reason : describeCause(signal.reason)) : undefined;
    for (const s of sessions) s.drop(why);
    await Promise.all([...sessions].map((s) => s.done));
    await closed;
    removeStaleSocket(path);
  }
}

function removeStaleSocket(path: string): void {
  try {
    if (lstatSync(path).isSocket()) unlinkSync(path);
  } catch {
    // not there
  }
}
