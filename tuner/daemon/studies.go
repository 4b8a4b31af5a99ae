package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/batchtune/batchtune/configs"
)

// LoadProblem is a study file the daemon could not load. The file's
// studies are skipped (or, on a reload, keep their previous version, see
// Kept); every other file is loaded.
type LoadProblem struct {
	File  string `json:"file"`
	Error string `json:"error"`
	// Kept names the study whose previously loaded version stays in
	// service because its file became unreadable or invalid on a reload.
	Kept string `json:"kept,omitempty"`
}

// loadedStudy is one valid study of the studies directory.
type loadedStudy struct {
	study  *configs.Study
	file   string
	sched  *Schedule
	target Target
}

// studyFiles lists the *.yaml and *.yml files of dir, hidden ones left
// out, in name order.
func studyFiles(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStudiesDir, err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.IsDir() {
			continue
		}
		if ext := filepath.Ext(name); ext == ".yaml" || ext == ".yml" {
			out = append(out, filepath.Join(dir, name))
		}
	}
	slices.Sort(out)
	return out, nil
}

// loadStudies reads every study file of dir and validates it with checks.
// A file that does not load, or names a study another file already
// named, is a LoadProblem; the rest load. Only an unreadable directory is
// an error.
func loadStudies(dir string, checks []configs.StudyCheck) ([]loadedStudy, []LoadProblem, error) {
	files, err := studyFiles(dir)
	if err != nil {
		return nil, nil, err
	}
	var (
		out      []loadedStudy
		problems []LoadProblem
		byName   = map[string]string{}
	)
	for _, f := range files {
		ls, err := loadStudy(f, checks)
		if err != nil {
			problems = append(problems, LoadProblem{File: f, Error: err.Error()})
			continue
		}
		if prev, ok := byName[ls.study.Name]; ok {
			problems = append(problems, LoadProblem{File: f, Error: fmt.Sprintf("name: study %q is already defined in %s", ls.study.Name, prev)})
			continue
		}
		byName[ls.study.Name] = f
		out = append(out, ls)
	}
	return out, problems, nil
}

func loadStudy(file string, checks []configs.StudyCheck) (loadedStudy, error) {
	s, err := configs.LoadStudy(file)
	if err != nil {
		return loadedStudy{}, err
	}
	if err := s.Validate(checks...); err != nil {
		return loadedStudy{}, err
	}
	sched, err := ParseSchedule(s.Schedule)
	if err != nil {
		// configs validated both fields; this is a zone database missing
		// at run time.
		return loadedStudy{}, fmt.Errorf("%s: %w", file, err)
	}
	return loadedStudy{study: s, file: file, sched: sched, target: TargetOf(s.Target)}, nil
}

// problemFiles returns the files of problems, for matching on reload.
func problemFiles(ps []LoadProblem) map[string]*LoadProblem {
	out := make(map[string]*LoadProblem, len(ps))
	for i := range ps {
		out[ps[i].File] = &ps[i]
	}
	return out
}
