// The common shape every benchmark's result is normalised into, so that one report and one comparison serve all.

/**
 * One figure of ours, usually against a baseline measured in the same run.
 *
 * `ratio` is the advantage factor: ours / baseline when higher is better, baseline / ours when lower is
 * better, so that above 1 always means ours is ahead and ratios of different metrics can share one chart.
 * `met` judges `target` in the metric's own direction (see `target_of`); it is absent when the target is defined
 * at another size than this run's (`target_at`).
 */
export interface Comparison {
  metric: string
  ours: number
  baseline: number | null
  /** What the baseline is, e.g. 'fastify' or 'exact brute force'. */
  baseline_name?: string
  unit: string
  ratio: number | null
  higher_is_better: boolean
  target?: number
  /**
   * What the target applies to: the ratio (default with a baseline), our value (default without), or the factor
   * ours / baseline as an issue states it ("at most 1.5x the 1-KB search"), judged in the metric's direction: at
   * most the target when lower is better, at least when higher is better.
   */
  target_of?: 'ratio' | 'value' | 'factor'
  /** The size the target is defined at, e.g. 'at 100,000 chunks'; `met` is absent when this run had another size. */
  target_at?: string
  met?: boolean
  /** Min and max over the rounds, where the benchmark reports them. */
  ours_range?: [number, number]
  baseline_range?: [number, number]
  /** Whether --compare judges it (false for figures too noisy to gate on). Default true. */
  tracked?: boolean
}

/** Extra figures for charts: latency percentiles per scenario, time per stage. */
export interface Series {
  id: string
  title: string
  unit: string
  kind: 'percentiles' | 'stages'
  groups: { label: string; values: Record<string, number> }[]
}

export type BenchStatus = 'ok' | 'failed' | 'skipped'

export interface NormalisedBench {
  name: string
  status: BenchStatus
  /** Why it failed or was skipped. */
  error?: string
  seconds: number
  /** 1, 5 and 15 minute load averages when it started and ended: how busy the machine was meanwhile. */
  load_average?: { before: number[]; after: number[] }
  machine?: Record<string, unknown>
  /** The options the runner passed to its run(). */
  options?: Record<string, unknown>
  sizes: Record<string, unknown>
  comparisons: Comparison[]
  series: Series[]
  /** What the benchmark does not report and the report cannot show (e.g. no min/max per round). */
  notes: string[]
}

export type SuiteMode = 'smoke' | 'quick' | 'full'

export interface SuiteResult {
  /** Bumped when the shape changes, so --compare can refuse files it cannot read. */
  format: 1
  started_at: string
  seconds: number
  mode: SuiteMode
  machine: Record<string, unknown>
  git_revision: string | null
  benchmarks: NormalisedBench[]
  /** The benchmarks' own results, untouched, by name. */
  raw: Record<string, unknown>
}
