package docs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/flashsale/flashsale/internal/config"
)

// root is the repository's root, from this package's directory.
const root = ".."

// maxReadmeLines bounds README.md: what a first-time user reads. The
// references live in this directory (api.md, config.md, …).
const maxReadmeLines = 400

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pages are README.md and every Markdown page of docs/ (not the generated
// scripts).
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil || len(docs) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	return append([]string{filepath.Join(root, "README.md")}, docs...)
}

// prose is a Markdown text without its fenced code blocks.
func prose(md string) string {
	var out []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "```") {
			in = !in
			continue
		}
		if !in {
			out = append(out, line)
		} else {
			out = append(out, "")
		}
	}
	return strings.Join(out, "\n")
}

// fenced returns the fenced code blocks of md, each whole.
func fenced(md string) []string {
	var blocks, cur []string
	in := false
	for _, line := range strings.Split(md, "\n") {
		switch {
		case strings.HasPrefix(line, "```") && in:
			blocks, cur, in = append(blocks, strings.Join(cur, "\n")), nil, false
		case strings.HasPrefix(line, "```"):
			in = true
		case in:
			cur = append(cur, line)
		}
	}
	return blocks
}

// anchors are the ids GitHub gives md's headings: lower case, spaces as
// hyphens, every other character but letters, digits, '-' and '_'
// dropped, a repeated id numbered -1, -2, ….
func anchors(md string) map[string]bool {
	ids := map[string]bool{}
	seen := map[string]int{}
	for _, line := range strings.Split(prose(md), "\n") {
		level := len(line) - len(strings.TrimLeft(line, "#"))
		if level == 0 || level > 6 || !strings.HasPrefix(line[level:], " ") {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(line[level:])) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		id := b.String()
		if n := seen[id]; n > 0 {
			ids[fmt.Sprintf("%s-%d", id, n)] = true
		} else {
			ids[id] = true
		}
		seen[id]++
	}
	return ids
}

// The README is what a first-time user reads: under maxReadmeLines lines,
// with the two commands CI and the tests rely on, as the Makefile has them.
func TestReadme_isShort_andGivesTheTwoCommands(t *testing.T) {
	readme := read(t, filepath.Join(root, "README.md"))
	if n := strings.Count(readme, "\n"); n >= maxReadmeLines {
		t.Errorf("README.md has %d lines: keep it under %d, and move references to docs/", n, maxReadmeLines)
	}
	makefile := read(t, filepath.Join(root, "Makefile"))
	for _, target := range []string{"run", "test"} {
		if !regexp.MustCompile(`(?m)^make ` + target + ` +# `).MatchString(readme) {
			t.Errorf("README.md has no `make %s` line", target)
		}
		if !regexp.MustCompile(`(?m)^` + target + `:`).MatchString(makefile) {
			t.Errorf("the Makefile has no %s target", target)
		}
	}
}

// Every relative link and image in README.md and docs/*.md points to a file
// that exists, and a link to a heading (#…) to one the page has.
func TestLinks_inReadmeAndDocs_pointToFilesAndHeadingsThatExist(t *testing.T) {
	link := regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)
	for _, page := range pages(t) {
		text := prose(read(t, page))
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
				if _, err := os.Stat(path); err != nil {
					t.Errorf("%s: link %s: no such file", page, target)
					continue
				}
			}
			if anchor != "" {
				if !strings.HasSuffix(path, ".md") {
					t.Errorf("%s: link %s: an anchor in a file that is not Markdown", page, target)
				} else if !anchors(read(t, path))[anchor] {
					t.Errorf("%s: link %s: %s has no heading #%s", page, target, path, anchor)
				}
			}
		}
	}
}

// configRow returns the cells of config.md's table row that names the
// variable, or nil.
func configRow(doc, name string) []string {
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) >= 4 && strings.HasPrefix(line, "| ") && strings.Contains(cells[1], "`"+name+"`") {
			return cells[1 : len(cells)-1]
		}
	}
	return nil
}

// Every variable internal/config reads is in a table of docs/config.md,
// with its default as the Config field's envDefault tag gives it; and so is
// every variable read by name anywhere else in the service's code (tracing's
// OpenTelemetry switch, the tools').
func TestConfigDoc_namesEveryVariable_withItsDefault(t *testing.T) {
	doc := read(t, filepath.Join(root, "docs", "config.md"))
	typ := reflect.TypeFor[config.Config]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("env")
		if name == "" {
			continue // derived, not read (RateLimitIPRPSSet)
		}
		row := configRow(doc, name)
		if row == nil {
			t.Errorf("docs/config.md has no row for %s (Config.%s)", name, f.Name)
			continue
		}
		if def, ok := f.Tag.Lookup("envDefault"); ok && !strings.Contains(row[1], "`"+def+"`") {
			t.Errorf("docs/config.md: %s's default is %q, want `%s` as internal/config has it", name, strings.TrimSpace(row[1]), def)
		}
	}

	getenv := regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\("([A-Z0-9_]+)"\)`)
	notOurs := map[string]bool{"GOPATH": true} // Go's own, read by the test harness to find installed tools
	for _, dir := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			for _, m := range getenv.FindAllStringSubmatch(read(t, path), -1) {
				if !notOurs[m[1]] && !strings.Contains(doc, "`"+m[1]+"`") {
					t.Errorf("%s reads %s: docs/config.md does not name it", path, m[1])
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// exported runs a block's export statement in bash, with nothing else in
// the environment but PATH, and returns the variables it set.
func exported(t *testing.T, statement string) map[string]string {
	t.Helper()
	cmd := exec.Command("bash", "-c", statement+"\nenv -0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %s: %v", statement, err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(out), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.Contains(statement, k+"=") {
			env[k] = v
		}
	}
	return env
}

// exportIn returns the export statement of the first sh block of md that
// contains marker, its continued lines joined.
func exportIn(t *testing.T, md, marker string) string {
	t.Helper()
	for _, b := range fenced(md) {
		if !strings.Contains(b, marker) {
			continue
		}
		for _, line := range strings.Split(strings.ReplaceAll(b, "\\\n", " "), "\n") {
			if strings.HasPrefix(line, "export ") {
				return line
			}
		}
	}
	t.Fatalf("no code block with %q and an export line", marker)
	return ""
}

// The README's real-servers block, pasted into bash, sets an environment
// the api and the worker start with: real servers, not embedded mode, and
// a payment provider chosen (it failed with `PAYMENT_PROVIDER is not set`).
// Its Stripe variant, exported on top, starts too.
func TestReadme_realServersBlock_setsAnEnvironmentTheServiceStartsWith(t *testing.T) {
	readme := read(t, filepath.Join(root, "README.md"))
	statement := exportIn(t, readme, "export REDIS_URL=")
	env := exported(t, statement)
	cfg, err := config.FromMap(env)
	if err != nil {
		t.Fatalf("the README's environment %v: %v", env, err)
	}
	if cfg.Embedded() || cfg.JWTSecret == "" || cfg.AdminToken == "" {
		t.Errorf("the README's environment %v: embedded %v, a JWT secret %v, an admin token %v; want real servers and both secrets",
			env, cfg.Embedded(), cfg.JWTSecret != "", cfg.AdminToken != "")
	}
	if err := cfg.CheckPayments(); err != nil {
		t.Errorf("the README's environment %v: %v", env, err)
	}

	stripe := exported(t, statement+"\n"+exportIn(t, readme, "export PAYMENT_PROVIDER=stripe"))
	cfg, err = config.FromMap(stripe)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.CheckPayments(); err != nil || cfg.Payments() != config.PaymentStripe {
		t.Errorf("the README's Stripe variant: provider %q, %v", cfg.Payments(), err)
	}
}
