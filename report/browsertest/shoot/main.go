// Command shoot opens a report page in headless Chromium and writes its
// screenshot as a PNG, after the same checks the browser tests make (no
// console errors, a non-blank render). It made the README's screenshot:
//
//	go run ./report/browsertest/shoot -o experiments/demo/report.png batchtune-report-emulator-process-run1.html
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/batchtune/batchtune/report/browsertest"
)

func main() {
	out := flag.String("o", "report.png", "the PNG to write")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: shoot [-o FILE.png] PAGE.html|URL")
		os.Exit(2)
	}
	if err := shoot(flag.Arg(0), *out); err != nil {
		fmt.Fprintln(os.Stderr, "shoot:", err)
		os.Exit(1)
	}
}

func shoot(target, out string) error {
	url := target
	if !strings.Contains(target, "://") {
		abs, err := filepath.Abs(target)
		if err != nil {
			return err
		}
		url = "file://" + abs
	}
	path, err := browsertest.Find()
	if err != nil {
		return err
	}
	b, err := browsertest.Start(context.Background(), path)
	if err != nil {
		return err
	}
	defer b.Close()
	page, err := b.Open(url, time.Minute)
	if err != nil {
		return err
	}
	if len(page.Problems) > 0 {
		return fmt.Errorf("console errors: %s", strings.Join(page.Problems, "; "))
	}
	if err := browsertest.CheckScreenshot(page.Screenshot); err != nil {
		return err
	}
	if err := os.WriteFile(out, page.Screenshot, 0o644); err != nil {
		return err
	}
	fmt.Printf("wrote %s (%d bytes); markers: %v\n", out, len(page.Screenshot), page.Markers)
	return nil
}
