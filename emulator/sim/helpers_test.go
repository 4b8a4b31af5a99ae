package sim

// testCalibration is a hand-made calibration for unit tests (a fake: the
// figures are round numbers, not measurements): host work linear in rows
// at 1 and 2 intra-op threads, the accelerator's projection a tenth of
// its preprocessing.
func testCalibration() *Calibration {
	curve := func(intra int, perRow, par float64) HostCurve {
		h := HostCurve{Intra: intra}
		for _, r := range []int{1, 8, 64, 512} {
			cpu := 20 + perRow*float64(r)
			h.Points = append(h.Points, HostPoint{Rows: r, MainCPUus: cpu, MainWallUS: cpu / par, AfterCPUus: cpu / 10, AfterWallUS: cpu / 10, CV: 0.1})
		}
		return h
	}
	return &Calibration{
		Format: CalibrationFormat, Model: "ranker", Device: "accelerator", Cores: 2, Source: "helpers_test.go",
		Host:    []HostCurve{curve(1, 30, 1), curve(2, 32, 1.8)},
		Serving: ServingCosts{RequestCPUus: 60, BatchCPUus: 40, ClientCPUus: 30, DelayUS: 50},
		Noise:   Noise{RunSigma: 0.02, JobCV: 0.3},
	}
}
