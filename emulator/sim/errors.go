package sim

import "errors"

var (
	// ErrTrial: a Trial cannot be simulated as given (no calibration, a
	// load that is neither closed nor open loop, a calibration for another
	// model or machine). The error names the field.
	ErrTrial = errors.New("sim: invalid trial")
	// ErrCalibration: a calibration file or value is malformed, or lacks
	// what a trial needs (an intra-op thread count it was not measured at).
	ErrCalibration = errors.New("sim: bad calibration")
	// ErrFit: serving costs cannot be fitted from the samples given (too
	// few, or degenerate).
	ErrFit = errors.New("sim: cannot fit serving costs")
)
