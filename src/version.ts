/** The package version, as in package.json (a test keeps the two equal); written into reports. */
export const VERSION = '0.1.0';
