// The benches' progress lines are the CLI's: one implementation of the bar and the plain periodic lines.
export { progress, type Progress } from '../../cli/progress.ts'
