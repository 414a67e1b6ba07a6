// What the report's generator embeds into the page ahead of the client files, from
// lib/views/format.js (its SHARED functions), as the client's type check sees it.
declare function formatBytes(n: number): string;
