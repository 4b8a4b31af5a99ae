package tuner

import "github.com/batchtune/batchtune/tfserving"

// Requests is the study's payload as read from its files or generated from
// its inputs; nil when it is discovered from a running server's signature
// and no trial has discovered it yet. The acceptance soak (package verify)
// sends the same requests as the trials.
func (p *StudyProber) Requests() []*tfserving.PredictRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.reqs
}
