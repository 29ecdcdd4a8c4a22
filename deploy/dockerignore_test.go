package deploy

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// dockerignore is a .dockerignore file: Docker's rules, last match wins, a
// pattern excluding a directory excludes what is under it.
type dockerignore []struct {
	re      *regexp.Regexp
	exclude bool // false for a "!" pattern
}

func readDockerignore(t *testing.T) dockerignore {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerignore
	for _, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		neg := strings.HasPrefix(line, "!")
		p := strings.TrimPrefix(path.Clean("/"+strings.TrimPrefix(line, "!")), "/")
		d = append(d, struct {
			re      *regexp.Regexp
			exclude bool
		}{globRegexp(p), !neg})
	}
	return d
}

// globRegexp is Docker's pattern syntax: "**" any number of directories, "*"
// and "?" within one path element.
func globRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(p); i++ {
		switch {
		case strings.HasPrefix(p[i:], "**/"):
			b.WriteString("(.*/)?")
			i += 2
		case strings.HasPrefix(p[i:], "**"):
			b.WriteString(".*")
			i++
		case p[i] == '*':
			b.WriteString("[^/]*")
		case p[i] == '?':
			b.WriteString("[^/]")
		default:
			b.WriteString(regexp.QuoteMeta(p[i : i+1]))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// ignored says whether rel (slash-separated, relative to the context) is
// left out of the build context.
func (d dockerignore) ignored(rel string) bool {
	ignored := false
	for _, p := range d {
		for dir := rel; dir != "."; dir = path.Dir(dir) {
			if p.re.MatchString(dir) {
				ignored = p.exclude
				break
			}
		}
	}
	return ignored
}

func TestDockerignore(t *testing.T) {
	d := readDockerignore(t)
	for rel, want := range map[string]bool{
		"go.mod": false, "go.sum": false, "cmd/api/main.go": false, "internal/lock/scripts/obtain.lua": false,
		"migrations/00001_locks.sql": false,
		".git/config":                true, ".env": true, "bin/api": true, "bench/go.mod": true, "docs/deploy.md": true,
		"cmd/api/main_test.go": true, "internal/x/testdata/a.txt": true, "Dockerfile": true, "flashsale.test": true,
	} {
		if got := d.ignored(rel); got != want {
			t.Errorf(".dockerignore: %s ignored %v; want %v", rel, got, want)
		}
	}
}
