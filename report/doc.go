// Package report turns what the store holds about a study into views for
// people: a self-contained HTML page with plots (inline SVG drawn with
// gonum.org/v1/plot, inline CSS, no script and no network), the same
// content as JSON, and the text tables the CLI prints.
//
// Data flows one way: Build reads a study, one of its runs, the run's
// trials (with their measurements) and the study's recommendation history
// from a Store and derives a Report, a plain value with every figure a view
// shows. WriteHTML, WriteJSON and WriteText render a Report; none of them
// reads the store again. The package never logs and never prints on its
// own: the CLI (batchtune report, trials, tune) and the daemon's HTTP
// handlers choose where the bytes go.
package report
