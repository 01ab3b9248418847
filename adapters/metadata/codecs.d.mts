// Types of codecs.mjs.
export declare function parseTimestamp(text: string): string
export declare const parseInt8: (text: string) => number
export declare const OID: { readonly INT8: 20; readonly TIMESTAMP: 1114; readonly TIMESTAMPTZ: 1184 }
