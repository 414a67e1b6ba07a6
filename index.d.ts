// No dependency on @types/node: where it is installed, `ProfileBuffer` is Node's Buffer;
// elsewhere the Uint8Array it extends.

/** Node's `Buffer` where `@types/node` declares it, else `Uint8Array` (which it extends). */
export type ProfileBuffer = typeof globalThis extends { Buffer: { prototype: infer B } } ? B : Uint8Array

/** The `Event` a profiler dispatches (`samplebufferfull`). */
export interface ProfilerEvent {
  readonly type: string
}

/** An event listener of a `Profiler`. */
export type ProfilerEventListener = ((event: ProfilerEvent) => void) | { handleEvent(event: ProfilerEvent): void }

/** Options of `new Profiler(...)`, as in the JS Self-Profiling API. */
export interface ProfilerInitOptions {
  /** Requested ms between samples; rounded up to a whole number of ms (at least 1). */
  sampleInterval: number
  /** The most samples the trace keeps (0 … 2³²−1). */
  maxBufferSize: number
}

export type ProfilerTraceFormat = 'json' | 'json-gzip' | 'pprof'

export interface ProfilerStopOptions {
  /**
   * `'json'` (default): resolve to the trace object; `'json-gzip'`: to its JSON, gzip'd;
   * `'pprof'`: to a gzip'd pprof profile (sample/count, wall/nanoseconds, cpu/nanoseconds).
   */
  format?: ProfilerTraceFormat
  /** With `'pprof'`: include the `cpu/nanoseconds` sample type (default true). */
  cpuTime?: boolean
  /**
   * With `'pprof'`: put samples at line-level locations from V8's line ticks (default false:
   * per-line totals are exact, the line of one sample is an apportionment).
   */
  lines?: boolean
  /**
   * Map frames of scripts with a source map to the original file, line, column and name
   * (default true, unless `SELFPROF_SOURCE_MAPS=0`); `false`: frames as V8 ran them.
   */
  sourceMaps?: boolean
  /**
   * With `'json'` and `'json-gzip'`: carry the text of the hot lines in `trace.sourceText`
   * (default true), from the files of the scripts this process loaded and from source
   * maps' `sourcesContent`; `false`: none.
   */
  sourceText?: boolean
  /**
   * Keep selfprof's own frames (withLabels, its hooks, integrations and preload) as V8
   * recorded them (default false, unless `SELFPROF_PROFILER_FRAMES=1`): hidden, selfprof's
   * own work at a sample's leaf shown as one frame `(selfprof)`.
   */
  profilerFrames?: boolean
}

/** A script URL: `file:///…` for application files, `node:…` for Node's own; for a mapped frame, its original file. */
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
  /** Index into `contexts`: the labels in effect when the sample was taken. */
  contextId?: number
  /** Thread CPU time (ms) since the previous sample of the trace (or its start). */
  cpuTime?: number
}

/** Labels as strings, e.g. `{ endpoint: 'GET /users/:id', span_id: '00f067aa0ba902b7' }`. */
export type Labels = Readonly<Record<string, string>>

export interface ProfilerContext {
  labels: Labels
}

/** How the trace's samples were joined to selfprof's signal records. */
export interface ProfilerTraceMetadata {
  /** Samples joined to the signal that took them: labels and `cpuTime` known. */
  matchedSamples: number
  /** Samples V8 took without a signal, labeled because no context switch happened around them. */
  betweenSignalsSamples: number
  /** Samples with no signal and no certain context: no labels, never guessed. */
  unmatchedSamples: number
  /** Samples whose context was known but whose labels were no longer kept. */
  labelsLostSamples?: number
  /**
   * How the recording's samples got their labels: `async_hooks` published them at every
   * continuation (Node 20, 22), the signal handler read them from the async context frame
   * (Node ≥ 24), or, on Windows (no signal), label switches logged with their time.
   */
  labelPath?: 'async-hooks' | 'context-frame' | 'switch-log'
}

/**
 * Extension: how many of the samples on a stack (as its innermost stack) V8 took at one
 * source line of that stack's innermost function, from V8's position ticks. Totals per
 * stack over the recording, not per sample; a stack's ticks add up to at most its samples
 * (V8 has no line for some). When a trace keeps only part of a V8 recording (another
 * profiler shared the sampler at a finer interval, or the buffer filled), each call-tree
 * node's ticks are scaled to the samples kept.
 */
export interface ProfilerLineTicks {
  /** Index into `stacks`. */
  stackId: number
  /** 1-based line in the stack's frame's resource. */
  line: number
  ticks: number
}

/** Extension: what source mapping did (see the README's "Source maps"). */
export interface ProfilerSourceMaps {
  /** Frames whose file, line, column (and maybe name) come from a source map. */
  mappedFrames: number
  /** Frames of scripts with a source map that has no mapping at their position: as V8 gave them. */
  unmappedFrames: number
  /** Line ticks of mapped frames whose line maps to no line of the original file: left out. */
  droppedLineTicks?: number
  /** Scripts with a source map (`map`: the map file's URL, `'inline'` or `'runtime'`), or whose map could not be used (`error`). */
  scripts: Array<{ url: string; map?: string; error?: string }>
  /** Where each mapped frame was in the generated script (`scripts[script]`), and V8's name if the map gave another. */
  generated: Array<{ frameId: number; script: number; line: number; column: number; name?: string }>
}

export interface ProfilerTrace {
  resources: ProfilerResource[]
  frames: ProfilerFrame[]
  stacks: ProfilerStack[]
  samples: ProfilerSample[]
  /** The label sets samples reference (each referenced at least once). */
  contexts: ProfilerContext[]
  /** Present on traces from `Profiler`; absent on `fromCpuProfile` ones. */
  metadata?: ProfilerTraceMetadata
  /** Extension, optional: per-line sample counts (absent when V8 recorded none). */
  lineTicks?: ProfilerLineTicks[]
  /** Extension, optional: a weighted profile (a heap profile read from pprof): what each
   * sample stands for, parallel to `samples`. Such a trace has no time line. */
  weight?: ProfilerTraceWeight
  /** Extension, optional: present when a frame's script has a source map. */
  sourceMaps?: ProfilerSourceMaps
  /**
   * Extension, optional: the text of the hot lines (of `lineTicks`, and each such
   * function's first line), `{ [resource]: { [line]: text } }`: from the scripts the
   * recording loaded and source maps' `sourcesContent`, never from a file a profile names.
   */
  sourceText?: Record<ProfilerResource, Record<number, string>>
}

export interface ProfilerTraceWeight {
  /** What is measured, as pprof names it (`'inuse_space'`). */
  type: string
  /** Its unit (`'bytes'`). */
  unit: string
  values: number[]
  /** What `counts` count (`'inuse_objects'`), if there are counts. */
  countType?: string
  counts?: number[]
}

/** A sampling profiling session; starts when constructed. An EventTarget. */
export declare class Profiler {
  constructor(options: ProfilerInitOptions)
  /** The sample interval in use, in ms: the request rounded up to a multiple of the base interval. */
  readonly sampleInterval: number
  /** True once stop() was called or the sample buffer filled. */
  readonly stopped: boolean
  /** Fired once when `maxBufferSize` samples were taken; the profiler is then stopped. */
  onsamplebufferfull: ((this: Profiler, ev: ProfilerEvent) => unknown) | null
  addEventListener(type: 'samplebufferfull' | (string & {}), listener: ProfilerEventListener | null, options?: boolean | { once?: boolean; signal?: unknown }): void
  removeEventListener(type: 'samplebufferfull' | (string & {}), listener: ProfilerEventListener | null, options?: boolean | object): void
  dispatchEvent(event: ProfilerEvent): boolean
  /**
   * Rejects with an `InvalidStateError` DOMException if already stopped (by an earlier
   * stop(); after `samplebufferfull` the first stop() still resolves to the trace).
   * `format: 'json-gzip'` or `'pprof'` resolves to bytes.
   */
  stop(options?: ProfilerStopOptions & { format?: 'json' }): Promise<ProfilerTrace>
  stop(options: ProfilerStopOptions & { format: 'json-gzip' | 'pprof' }): Promise<ProfileBuffer>
  stop(options?: ProfilerStopOptions): Promise<ProfilerTrace | ProfileBuffer>
}

/**
 * Sets the base interval in ms (default 1; a whole number of µs, 0.01 to 1000): every
 * profiler's sampleInterval is rounded up to a multiple of it. Throws an
 * `InvalidStateError` DOMException while profilers run.
 */
export declare function setBaseInterval(ms: number): void

/** Converts a V8 CPU profile (`.cpuprofile`) into a trace; timestamps count from its start. */
export declare function fromCpuProfile(profile: object, options?: ProfilerStopOptions & { format?: 'json' }): Promise<ProfilerTrace>
export declare function fromCpuProfile(profile: object, options: ProfilerStopOptions & { format: 'json-gzip' | 'pprof' }): Promise<ProfileBuffer>
export declare function fromCpuProfile(profile: object, options?: ProfilerStopOptions): Promise<ProfilerTrace | ProfileBuffer>

/** A label value: numbers, bigints and booleans are stored as strings. */
export type LabelValue = string | number | bigint | boolean

/**
 * Runs `fn(...args)` with `labels` merged over the current labels; they follow every
 * async continuation `fn` starts, and every sample taken meanwhile carries them.
 * A `null`/`undefined` value removes a key. Returns what `fn` returns.
 */
export declare function withLabels<R, A extends unknown[]>(
  labels: Record<string, LabelValue | null | undefined>,
  fn: (...args: A) => R,
  ...args: A
): R

/** Merges `labels` over the current ones for the rest of the current async context. */
export declare function setLabels(labels: Record<string, LabelValue | null | undefined>): void

/** The labels in effect (frozen). */
export declare function getLabels(): Labels

export interface DatadogExporterOptions extends ExporterTuning {
  type: 'datadog'
  /**
   * The agent, e.g. `http://localhost:8126`; profiles go to `{url}/profiling/v1/input`.
   * Default: as dd-trace finds it: $DD_TRACE_AGENT_URL, else
   * http://$DD_AGENT_HOST:$DD_TRACE_AGENT_PORT (127.0.0.1, 8126); or, with an API key
   * (`apiKey`, or $DD_API_KEY when $DD_PROFILING_AGENTLESS is true or no agent variable is
   * set), agentless: https://intake.profile.<site>/api/v2/profile.
   */
  url?: string
  /** A Datadog API key: without `url`, uploads go agentless to the site's intake. */
  apiKey?: string
  /** Agentless: the Datadog site, e.g. `datadoghq.eu` (default $DD_SITE, else `datadoghq.com`). */
  site?: string
}

export interface PyroscopeExporterOptions extends ExporterTuning {
  type: 'pyroscope'
  /** The server; profiles go to `{url}/ingest`. */
  url: string
  appName?: string
  authToken?: string
  basicAuthUser?: string
  basicAuthPassword?: string
  /** Sent as `X-Scope-OrgID`. */
  tenantId?: string
  /** Sample labels sent as series labels (default: `start`'s `pyroscope.seriesLabels`). */
  seriesLabels?: string[]
}

export interface OtlpExporterOptions extends ExporterTuning {
  type: 'otlp'
  /**
   * The full profiles endpoint. Default: $OTEL_EXPORTER_OTLP_PROFILES_ENDPOINT as-is, else
   * $OTEL_EXPORTER_OTLP_ENDPOINT + `/v1development/profiles`, else
   * `http://localhost:4318/v1development/profiles`.
   */
  url?: string
  /**
   * Default: $OTEL_EXPORTER_OTLP_PROFILES_HEADERS, else $OTEL_EXPORTER_OTLP_HEADERS (`k=v,k2=v2`).
   * Headers HTTP sets itself (`content-length`, `transfer-encoding`, `connection`, …) are refused.
   */
  headers?: Record<string, string>
  /** Default: $OTEL_EXPORTER_OTLP_PROFILES_COMPRESSION / $OTEL_EXPORTER_OTLP_COMPRESSION, else 'none'. */
  compression?: 'gzip' | 'none'
}

export interface FileExporterOptions extends ExporterTuning {
  type: 'file'
  /** Profiles are written as `<dir>/<service>-<ISO time>.pb.gz`. */
  dir: string
  /** Also write the spec trace as `<dir>/<service>-<ISO time>.trace.json.gz`. */
  trace?: boolean
}

export interface ExporterTuning {
  /** Per upload (default 10000). */
  timeoutMs?: number
  /** Retries on network errors, 5xx and 429 (default 3), with backoff from `backoffMs` (500). */
  retries?: number
  backoffMs?: number
  /** Profiles waiting at most; past it the oldest is dropped (default 4). */
  queueSize?: number
}

export interface StartOptions {
  /** Default: $SELFPROF_SERVICE, $DD_SERVICE, $OTEL_SERVICE_NAME, else the app's package.json name (as dd-trace takes it), else 'node'. */
  service?: string
  env?: string
  version?: string
  tags?: Record<string, string>
  /** ms between samples (default 1000/99, rounded up to the base interval). */
  sampleInterval?: number
  /** ms per exported profile (default 60000). */
  period?: number
  collectCpuTime?: boolean
  /** pprof samples at line-level locations (default false; see `ProfilerStopOptions.lines`). */
  lines?: boolean
  /** A heap profile (V8's sampling heap profiler) every period (default true; $SELFPROF_HEAP). */
  heap?: boolean
  /** Bytes between heap samples, 1024 … 2³¹−1 (default 524288). */
  heapSamplingInterval?: number
  /** Profile worker_threads too, merged into each period's profile (default true; $SELFPROF_WORKERS). */
  workers?: boolean
  /** Map frames through source maps (default true, unless `SELFPROF_SOURCE_MAPS=0`). */
  sourceMaps?: boolean
  /** Keep selfprof's own frames in the profiles (default false, unless `SELFPROF_PROFILER_FRAMES=1`). */
  profilerFrames?: boolean
  /**
   * Label samples from the app's tracer, dd-trace or OpenTelemetry's SDK, wiring it
   * without code (default true; $SELFPROF_SPAN_LABELS).
   */
  spanLabels?: boolean
  /**
   * A request that runs one named GraphQL operation gets it as its endpoint (`query
   * GetUser`), its route as the label `http_route` (default true; $SELFPROF_OPERATION_ENDPOINTS).
   */
  operationEndpoints?: boolean
  exporters?: Array<DatadogExporterOptions | PyroscopeExporterOptions | OtlpExporterOptions | FileExporterOptions>
  pyroscope?: {
    /** Sample labels that become Pyroscope series labels (default `['endpoint']`). */
    seriesLabels?: string[]
  }
}

export interface ProfilingSession {
  /** Ships the current period now; waits for the uploads up to `timeoutMs`. */
  flush(timeoutMs?: number): Promise<void>
  /**
   * Stops profiling; the last partial period is shipped. Waits up to `timeoutMs` (2000) for
   * the uploads (each waiting profile tried once more), then abandons them: one warning
   * per exporter names what was not sent.
   */
  stop(timeoutMs?: number): Promise<void>
}

/** Service mode: continuous profiling, a pprof profile to each exporter every period. */
export declare function start(options?: StartOptions): ProfilingSession

/**
 * An OpenTelemetry SpanProcessor: a starting local root span of a request (kind SERVER or
 * CONSUMER) gives its span_id, trace_id and endpoint to the async context that started it;
 * the endpoint follows the span's final route. Service mode adds one by itself.
 */
export declare function openTelemetrySpanProcessor(): {
  onStart(span: unknown, parentContext: unknown): void
  onEnding(span: unknown): void
  onEnd(span: unknown): void
  forceFlush(): Promise<void>
  shutdown(): Promise<void>
}

/**
 * dd-trace integration (dd-trace must be installed; selfprof never requires it): a
 * starting local root span of a request gives its span_id, trace_id and endpoint to the
 * async context that started it, and finished web requests are counted per endpoint.
 * Service mode does this by itself.
 */
export declare function ddTraceIntegration(): { disable(): void }

/**
 * Converts a selfprof trace (object, JSON text, or json-gzip bytes), a V8 CPU profile (a
 * `.cpuprofile` file's contents, as object, text or gzip'd bytes) or a pprof profile
 * (bytes, plain or gzip'd): `'cpuprofile'` gives a Chrome DevTools `.cpuprofile` (JSON text,
 * also read by speedscope), `'folded'` folded stacks (`outer;...;leaf count` lines, for
 * flamegraph.pl, inferno and speedscope), `'trace'` the spec trace's JSON, `'pprof'` a
 * Buffer of gzip'd profile.proto. Bad input throws an Error naming what is wrong.
 * selfprof's own frames are hidden (`profilerFrames: true`: as recorded).
 */
export declare function convert(input: ProfilerTrace | string | Uint8Array | ArrayBuffer, options: { to: 'cpuprofile' | 'folded' | 'trace'; sourceMaps?: boolean; profilerFrames?: boolean }): string
export declare function convert(input: ProfilerTrace | string | Uint8Array | ArrayBuffer, options: { to: 'pprof'; lines?: boolean; sourceMaps?: boolean; profilerFrames?: boolean }): ProfileBuffer

/**
 * Reads a trace or pprof profile (as `convert` takes it) into a trace object. `sourceMaps:
 * true` (as for `convert`; default false) maps its frames through the source maps found here.
 */
export declare function readProfile(input: ProfilerTrace | string | Uint8Array | ArrayBuffer, options?: { sourceMaps?: boolean; profilerFrames?: boolean }): ProfilerTrace

/** A profile as `readProfile` takes it: a trace, a V8 CPU profile's JSON, or pprof bytes. */
export type ProfileInput = ProfilerTrace | string | Uint8Array

/** Options of `htmlReport`. */
export interface HtmlReportOptions {
  /** The document's title and heading (default `'selfprof report'`). */
  title?: string
  /** The profiler's `sampleInterval` (ms), shown in the summary; else the median gap between samples is. */
  sampleInterval?: number
  /**
   * Another profile to compare with: the report opens on its diff view, A = `baseline`,
   * B = `trace`. A bad baseline is a TypeError naming it.
   */
  baseline?: ProfileInput
  /** Names of A and B in the diff view (e.g. file names). */
  baselineName?: string
  name?: string
  /** Open the diff view on two values of a label (`null`: samples without it). */
  labelDiff?: { key: string; a: string | null; b: string | null }
  /**
   * Embed the text of the hot lines that the trace carries (`trace.sourceText`; default
   * true; bounded: 240 characters a line, 4000 lines). No local file is read.
   */
  sources?: boolean
  /** The view to open (default `'flame'`, or `'diff'` with `baseline`/`labelDiff`). */
  view?: 'flame' | 'timeorder' | 'sandwich' | 'diff'
  /**
   * Map the frames through the source maps found here first (default false: a trace from
   * `stop()` or `record` was mapped when it was built).
   */
  sourceMaps?: boolean
  /** Show selfprof's own frames as recorded (default false: hidden, as `convert` hides them). */
  profilerFrames?: boolean
  /** The event-loop blocks listed first are longer than this (ms, default 50): `eventLoopBlocks`. */
  blockThresholdMs?: number
}

/**
 * A self-contained HTML report of a profile, as one document string: a timeline of the
 * samples (colored by kind or by a label; dragging selects a time range that filters every
 * view), a flame graph (click to zoom, search), a time-ordered flame chart, a sandwich view
 * (a function's callers and callees merged over its call sites, and its hot source lines),
 * a diff view (against `baseline`, or between two label values), the top functions, and
 * samples per label value (click one to filter everything to it). Optionally GC samples
 * under the code that ran just before them (marked as attributed). The trace is embedded as
 * JSON; the page loads nothing from the network.
 */
export declare function htmlReport(trace: ProfileInput, options?: HtmlReportOptions): string

/** A frame of an event-loop block's stack. */
export interface BlockFrame {
  name: string
  url?: string
  line?: number
  column?: number
}

/** A stretch where a thread's event loop did not turn for longer than the threshold. */
export interface EventLoopBlock {
  /** When it began, ms on the trace's clock (`samples[i].timestamp`'s); absent when read from a pprof. */
  start?: number
  /** When it began, ms after the recording's first sample (a pprof's: after its start). */
  offset: number
  /** Its Unix time in ms, when the recording's time origin is known (a pprof's blocks). */
  unixMs?: number
  /** Its duration (ms): the real one is within `duration ± error`. */
  duration: number
  error: number
  /**
   * Of `duration`, the ms its thread was not running: where V8 took no sample for over two
   * typical intervals and the thread's CPU time says it did not run (a busy machine, a CPU limit).
   */
  unsampled: number
  /** The thread's CPU time (ms) between its first and last samples, when the samples carry it. */
  cpu?: number
  samples: number
  /** Its first and last samples' indices in the trace (absent when read from a pprof). */
  firstSample?: number
  lastSample?: number
  /** It was running as the recording began (or still as it stopped): it lasted at least `duration`. */
  openStart?: boolean
  openEnd?: boolean
  /** Its thread's `thread name` and `thread id`, in a trace of several threads. */
  thread?: Record<string, string>
  /** The requests whose code ran in it: their labels (the thread's left out), most samples first. */
  requests: { labels: Record<string, string>; samples: number }[]
  otherRequests?: number
  /** Its samples that carry no request's labels, and its garbage-collection samples. */
  unlabeled: number
  gc: number
  /** The function it ran in: the deepest frame most of its JS samples share, and how many do. */
  function?: BlockFrame & { samples: number }
  /** Its heaviest stacks, leaf first, most samples first; `more`: frames beyond those kept. */
  stacks: { frames: BlockFrame[]; samples: number; more?: number }[]
}

export interface EventLoopBlocks {
  /** Found from the samples' times, read from a pprof's comments, or not looked for (`note` says why). */
  from: 'samples' | 'pprof' | 'none'
  thresholdMs: number
  /** How many there were (a pprof keeps the 20 longest). */
  found: number
  blocks: EventLoopBlock[]
  note?: string
}

/**
 * The event-loop blocks of a profile: the stretches where its event loop did not turn for
 * longer than `thresholdMs` (default 50), each with its duration, the requests whose code
 * ran in it and its heaviest stacks; found from a trace's sample times, or read from the
 * comments of a pprof selfprof wrote. Input and `sourceMaps`/`profilerFrames` as `readProfile`.
 */
export declare function eventLoopBlocks(
  input: ProfileInput | ArrayBuffer,
  options?: { thresholdMs?: number; sourceMaps?: boolean; profilerFrames?: boolean },
): EventLoopBlocks

/** One side's share of a function: % of that side's busy samples, and B − A in percentage points. */
export interface DiffShare {
  a: number
  b: number
  delta: number
}

export interface DiffResult {
  /** Each side's samples, and busy samples (all but idle): the shares' denominators. */
  a: { samples: number; busy: number }
  b: { samples: number; busy: number }
  /** Biggest |self.delta| first. `(garbage collector)` and `(program)` are rows too. */
  functions: Array<{
    name: string
    location: string
    samples: { aSelf: number; bSelf: number; aTotal: number; bTotal: number }
    /** As the innermost frame. */
    self: DiffShare
    /** Anywhere on the stack, each sample once. */
    total: DiffShare
  }>
}

/**
 * The change from profile `a` (the baseline) to `b`: each function's share of its side's
 * busy samples in B minus in A. Functions match by name, file, line and column
 * (`ignoreLines`: name and file).
 */
export declare function diffProfiles(a: ProfileInput, b: ProfileInput, options?: { ignoreLines?: boolean; profilerFrames?: boolean }): DiffResult

/** The same between the samples with label `key` = `a` and those with `key` = `b` (`null`: without the label). */
export declare function diffLabelValues(
  trace: ProfileInput,
  key: string,
  a: string | null,
  b: string | null,
  options?: { ignoreLines?: boolean; profilerFrames?: boolean },
): DiffResult
