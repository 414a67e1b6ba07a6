/// <reference types="node" />

/** Options of `new Profiler(...)`, as in the JS Self-Profiling API. */
export interface ProfilerInitOptions {
  /** Requested ms between samples; rounded up to a whole number of ms (at least 1). */
  sampleInterval: number
  /** The most samples the trace keeps (0 … 2³²−1). */
  maxBufferSize: number
}

export type ProfilerTraceFormat = 'json' | 'json-gzip'

export interface ProfilerStopOptions {
  /** `'json'` (default): resolve to the trace object; `'json-gzip'`: to its JSON, gzip'd. */
  format?: ProfilerTraceFormat
}

/** A script URL: `file:///…` for application files, `node:…` for Node's own. */
export type ProfilerResource = string

export interface ProfilerFrame {
  /** The function's name; `''` for anonymous functions. */
  name: string
  /** Index into `resources`; absent for builtins. */
  resourceId?: number
  /** 1-based line of the function's definition. */
  line?: number
  /** 1-based column of the `(` opening the function's parameter list. */
  column?: number
}

export interface ProfilerStack {
  /** Index into `frames`. */
  frameId: number
  /** Index into `stacks` of the caller's stack; always smaller than this stack's index. */
  parentId?: number
}

/** Why a sample has no JS stack: V8's `(garbage collector)`, `(idle)` and `(program)`. */
export type ProfilerMarker = 'gc' | 'idle' | 'other'

export interface ProfilerSample {
  /** Milliseconds since `performance.timeOrigin` (comparable with `performance.now()`). */
  timestamp: number
  /** Index into `stacks`; absent when no JS was on the stack. */
  stackId?: number
  marker?: ProfilerMarker
}

export interface ProfilerTrace {
  resources: ProfilerResource[]
  frames: ProfilerFrame[]
  stacks: ProfilerStack[]
  samples: ProfilerSample[]
}

/** A sampling profiling session; starts when constructed. */
export declare class Profiler extends EventTarget {
  constructor(options: ProfilerInitOptions)
  /** The sample interval in use, in ms. */
  readonly sampleInterval: number
  readonly stopped: boolean
  /** Rejects with an `InvalidStateError` DOMException if already stopped. */
  stop(): Promise<ProfilerTrace>
  stop(options: { format: 'json-gzip' }): Promise<Buffer>
  stop(options?: ProfilerStopOptions): Promise<ProfilerTrace | Buffer>
}

/** Converts a V8 CPU profile (`.cpuprofile`) into a trace; timestamps count from its start. */
export declare function fromCpuProfile(profile: object): Promise<ProfilerTrace>
export declare function fromCpuProfile(profile: object, options: { format: 'json-gzip' }): Promise<Buffer>
export declare function fromCpuProfile(profile: object, options?: ProfilerStopOptions): Promise<ProfilerTrace | Buffer>
