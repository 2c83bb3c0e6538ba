declare module 'jstat' {
  export const jStat: {
    gammaln(x: number): number;
    betaln(a: number, b: number): number;
    ibeta(x: number, a: number, b: number): number;
    beta: {
      inv(p: number, a: number, b: number): number;
      cdf(x: number, a: number, b: number): number;
      mean(a: number, b: number): number;
    };
    studentt: {
      inv(p: number, dof: number): number;
      cdf(x: number, dof: number): number;
    };
  };
  const jstat: { jStat: typeof jStat };
  export default jstat;
}
declare module 'javascript-lp-solver' {
  const solver: {
    Solve(model: unknown): Record<string, number | boolean | undefined>;
  };
  export default solver;
}
