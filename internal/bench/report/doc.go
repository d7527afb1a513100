// Package report is the result format shared by every `coopfs bench`
// workload: rows of repeated measurements (median of the repetitions),
// each optionally compared with a ceiling measured in the same run (the
// ratio is the median of the per-repetition ratios, so that the machine's
// swings cancel out), a target for the ratio, notes; printed as a table,
// written as JSON, and drawn as bar plots (PNG and SVG, gonum/plot).
package report
