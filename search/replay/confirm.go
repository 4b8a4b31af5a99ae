package replay

import (
	"slices"

	"github.com/batchtune/batchtune/configs"
	"github.com/batchtune/batchtune/internal/confirm"
	"github.com/batchtune/batchtune/search"
)

// confirmStream sets the confirmation's draws apart from the search's: the
// stage re-measures on fresh restarts, so a candidate's repeats are new
// draws of its recorded runs, not the draw that made it a candidate. The
// same for every strategy under a seed (common random numbers).
const confirmStream = 0x636f6e6669726d // "confirm"

// confirmRun runs the tuner's confirmation stage (package confirm, with
// the study settings c) on the candidates a search handed over
// (confirm.Candidates): each is re-measured c.Repeats times, the
// undecided ones up to c.MaxRepeats (the leader up to c.CleanRepeats under
// that stricter verdict), each repeat a fresh draw of all the
// configuration's recorded runs, reference runs included (Restarts); the
// winner is the leader by the conservative bound among those eligible. It returns the winner (nil when
// none was eligible, or there were no candidates), its truth and how many
// repeats the stage took. The baseline the tuner states a gain against is
// not measured: it does not change the winner.
func confirmRun(s *Surface, cands []confirm.Candidate, seed uint64, c configs.Confirmation) (search.Config, Truth, int, error) {
	if len(cands) == 0 {
		return nil, Truth{}, 0, nil
	}
	rule := confirm.RuleOf(c, s.objective().Direction())
	rp := s.Restarts(seed ^ confirmStream)
	all := make([]*confirm.Tally, len(cands))
	for i := range all {
		all[i] = &confirm.Tally{}
	}
	n := 0
	for round := range rule.Rounds(len(all)) {
		want, _ := rule.Next(round, all, len(all))
		if !slices.Contains(want, true) {
			break
		}
		for i, w := range want {
			if !w {
				continue
			}
			tr, err := rp.Run(cands[i].Config)
			if err != nil {
				return nil, Truth{}, n, err
			}
			n++
			t := all[i]
			t.Repeats++
			if tr.Outcome == search.Succeeded && tr.Feasible {
				t.Feasible++
			}
			if tr.Measured {
				t.Samples = append(t.Samples, tr.Value)
			}
			rule.Summarise(t)
		}
	}
	lead := rule.Leader(all)
	if lead < 0 {
		return nil, Truth{}, n, nil
	}
	truth, _ := s.Truth(cands[lead].Config)
	return cands[lead].Config, truth, n, nil
}
