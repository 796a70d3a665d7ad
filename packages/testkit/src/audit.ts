import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { AuditEntry } from './types.js';

const run = promisify(execFile);

/**
 * Reads the JSON-lines audit trail a scripted server appended to `path`.
 *
 * @returns the entries in arrival order; `[]` when the file does not exist (the server received
 *   nothing, or never started).
 * @throws {SyntaxError} naming the line when a line is not JSON.
 */
export async function readAuditTrail(path: string): Promise<AuditEntry[]> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  const entries: AuditEntry[] = [];
  text.split('\n').forEach((line, index) => {
    if (line.trim() === '') return;
    try {
      entries.push(JSON.parse(line) as AuditEntry);
    } catch (error) {
      throw new SyntaxError(`${path}:${index + 1}: audit line is not JSON`, { cause: error });
    }
  });
  return entries;
}

/**
 * Whether a process with this id exists (signal 0 probe). A process owned by another user counts as
 * alive.
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * A fresh, not yet existing file path in `os.tmpdir()` for an audit trail, e.g.
 * `/tmp/stepbind-audit-paging-12345-1f2e3d4c5b6a.jsonl`. `label` is reduced to `[A-Za-z0-9_-]`.
 * The caller removes the file; `tempAudit` (removed on dispose) is usually what a test wants.
 */
export function tempAuditPath(label: string): string {
  const safe = label.replace(/[^A-Za-z0-9_-]+/g, '-').slice(0, 60);
  return join(
    tmpdir(),
    `stepbind-audit-${safe}-${process.pid}-${randomBytes(6).toString('hex')}.jsonl`,
  );
}

/** One running process, as `ps` shows it. */
export interface ProcessInfo {
  readonly pid: number;
  readonly pgid: number;
  /** `ps` state letters, e.g. `S`, `Sl`, `R+`. Zombies (`Z`) are never listed. */
  readonly stat: string;
  readonly args: string;
}

/**
 * Every running process (zombies left out: they are dead and hold nothing, only their parent has
 * not reaped them yet), from `ps -eo pid=,pgid=,stat=,args=`. POSIX only.
 */
export async function runningProcesses(): Promise<ProcessInfo[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,pgid=,stat=,args=']);
  return stdout.split('\n').flatMap((line) => {
    const match = /^\s*(\d+)\s+(\d+)\s+(\S+)\s?(.*)$/.exec(line);
    if (match === null || match[3]?.startsWith('Z') === true) return [];
    return [
      { pid: Number(match[1]), pgid: Number(match[2]), stat: match[3] ?? '', args: match[4] ?? '' },
    ];
  });
}

/** The running members of process group `pgid` (see {@link runningProcesses}). */
export async function processGroupMembers(pgid: number): Promise<ProcessInfo[]> {
  return (await runningProcesses()).filter((p) => p.pgid === pgid);
}
