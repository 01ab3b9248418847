// Types of postgres-driver-patch.mjs (plain JavaScript: npm install runs it before tsx is there).
export declare function mendConnection(text: string, file: string): { text: string; changed: boolean }
export declare function driverRoot(): string
export declare function mendInstalledDriver(root?: string, write?: boolean): { version: string; files: { file: string; changed: boolean }[]; skipped: boolean }
