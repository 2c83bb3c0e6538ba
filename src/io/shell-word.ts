/**
 * An argument as a POSIX shell reads it back: as it is when it holds only characters no shell
 * treats specially, else in single quotes (a quote inside as '\''). For command lines the
 * CLI prints for a person to copy.
 */
export function shellWord(arg: string): string {
  return /^[\w./:=,@%+-]+$/.test(arg) ? arg : `'${arg.replace(/'/g, "'\\''")}'`;
}
