import { linkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { networkFileSystemOf, networkStateNote } from '../src/store/network-fs.js';
import { cli } from './cli-helpers.js';
import { tempDir } from './temp.js';

// A SQLite state on a cluster's shared storage: SQLite's WAL locks and shared memory hold only
// among processes on one machine, so serve, inspect and backup print a note there. No network
// file system can be mounted on the machines these tests run on (the kernel offers neither nfs
// nor cifs), so the names are checked against the f_type values of Linux's
// include/uapi/linux/magic.h and the file systems' own sources, and the commands on a local
// file system, where they must stay silent.

describe('network file systems', () => {
  it('names the f_type of NFS, SMB/CIFS, Lustre, GPFS, CephFS, BeeGFS and AFS, and no local one', () => {
    const named: [number, string][] = [
      [0x6969, 'NFS'], [0x517b, 'SMB'], [0xff534d42, 'CIFS'], [0xfe534d42, 'SMB2'], [0x0bd00bd0, 'Lustre'],
      [0x47504653, 'GPFS'], [0x00c36400, 'CephFS'], [0x19830326, 'BeeGFS'], [0x6b414653, 'kAFS'], [0x5346414f, 'OpenAFS'],
    ];
    for (const [type, name] of named) expect(networkFileSystemOf(type), type.toString(16)).toBe(name);
    // A C long read as a signed 32-bit value (CIFS's magic has its top bit set).
    expect(networkFileSystemOf(0xff534d42 | 0)).toBe('CIFS');
    // ext2/3/4, tmpfs, overlayfs, XFS, Btrfs, ZFS, FUSE (local or not: cannot tell), procfs.
    for (const local of [0xef53, 0x01021994, 0x794c7630, 0x58465342, 0x9123683e, 0x2fc12fc1, 0x65735546, 0x9fa0]) {
      expect(networkFileSystemOf(local), local.toString(16)).toBeUndefined();
    }
  });

  it('a state on a local file system gets no note (networkStateNote, inspect, backup)', async () => {
    const dir = tempDir();
    const state = join(dir, 'state.db');
    expect(networkStateNote(state)).toBeUndefined(); // not there yet: its folder is asked
    expect(networkStateNote(':memory:')).toBeUndefined();
    writeFileSync(join(dir, 'r.jsonl'), '{"prompt_id":"a","reward":1}\n');
    expect((await cli(['observe', '--results', join(dir, 'r.jsonl'), '--state', state])).code).toBe(0);
    expect(networkStateNote(state)).toBeUndefined();
    for (const args of [['inspect', '--state', state], ['backup', '--state', state, '--out', join(dir, 'copy.db')]]) {
      const r = await cli(args);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr, args[0]).toBe('');
    }
  });

  it('a state with two names (a hard link, as cp -al makes) gets a note from inspect and backup; one name again, none', async () => {
    // Found by an operator's review: a service writing runs/budget.db and an observe through a
    // cp -al snapshot's name lost 1,200 of 2,800 rollouts answered as applied, without an error.
    const dir = tempDir();
    const state = join(dir, 'state.db');
    writeFileSync(join(dir, 'r.jsonl'), '{"prompt_id":"a","reward":1}\n');
    expect((await cli(['observe', '--results', join(dir, 'r.jsonl'), '--state', state])).code).toBe(0);
    linkSync(state, join(dir, 'snapshot.db'));
    for (const args of [['inspect', '--state', state], ['backup', '--state', join(dir, 'snapshot.db'), '--out', join(dir, 'copy.db')]]) {
      const r = await cli(args);
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr, args[0]).toContain(`has 2 hard links (other names for the same file, e.g. a snapshot of its folder made with cp -al)`);
      expect(r.stderr, args[0]).toContain('write the state through one name only');
    }
    const copy = await cli(['inspect', '--state', join(dir, 'copy.db')]);
    expect(copy.stderr).toBe('');
  });
});
