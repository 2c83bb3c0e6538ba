import { statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * statfs(2) `f_type` of the network and cluster file systems a training cluster mounts its
 * shared storage with (Linux's include/uapi/linux/magic.h, and each file system's own source
 * for those outside the kernel: Lustre, GPFS, BeeGFS).
 */
const NETWORK_FILE_SYSTEMS: ReadonlyMap<number, string> = new Map([
  [0x6969, 'NFS'],
  [0x517b, 'SMB'],
  [0xff534d42, 'CIFS'],
  [0xfe534d42, 'SMB2'],
  [0x0bd00bd0, 'Lustre'],
  [0x47504653, 'GPFS'],
  [0x00c36400, 'CephFS'],
  [0x19830326, 'BeeGFS'],
  [0x6b414653, 'kAFS'],
  [0x5346414f, 'OpenAFS'],
]);

/** The name of the network file system `type` (a statfs f_type) is, or undefined for any other. */
export function networkFileSystemOf(type: number): string | undefined {
  return NETWORK_FILE_SYSTEMS.get(type >>> 0);
}

/**
 * A note when the SQLite state at `path` (or, not there yet, its folder) is on a network file
 * system, else undefined. SQLite's WAL mode keeps a `-shm` file of shared memory beside the
 * state and locks it: both hold among processes on one machine only (sqlite.org/wal.html,
 * "WAL does not work over a network filesystem"). The trainer's machine alone is fine; a
 * teammate's `inspect` from another machine of the cluster on the same file is not.
 */
export function networkStateNote(path: string): string | undefined {
  if (path === ':memory:') return undefined;
  let type: number;
  try {
    type = statfsSync(path).type;
  } catch {
    try {
      type = statfsSync(dirname(resolve(path))).type;
    } catch {
      return undefined;
    }
  }
  const name = networkFileSystemOf(type);
  if (name === undefined) return undefined;
  return `${path} is on a network file system (${name}): SQLite's locks and shared memory (its -wal and -shm files) hold only among processes on one machine, so use this state from one machine at a time (elsewhere, read a copy: backup), or keep a state that several machines use in PostgreSQL (--state postgres://...)`;
}
