package deploy

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/flashsale/flashsale/internal/config"
)

// The compose file validates with its secrets given, and refuses to expand
// while any of them is missing or empty: the stack never starts with a
// well-known password. .env.example names every variable the file reads.
func TestCompose_validatesAndRequiresSecrets(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{} // variable -> "?" (required), "-" (defaulted) or ""
	for _, m := range regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(:?[-?])?[^}]*\}`).FindAllStringSubmatch(yamlCode(string(raw)), -1) {
		vars[m[1]] = strings.TrimPrefix(m[2], ":")
	}
	var required []string
	for v, kind := range vars {
		if kind == "?" {
			required = append(required, v)
		} else if kind == "" {
			t.Errorf("${%s} has neither a default (${%s:-…}) nor a message (${%s:?…}): unset, it expands to nothing", v, v, v)
		}
	}
	sort.Strings(required)
	var want []string
	for k := range testSecrets {
		want = append(want, k)
	}
	sort.Strings(want)
	if !slices.Equal(required, want) {
		t.Fatalf("variables docker-compose.yml requires: %v; this test fills in %v (testSecrets)", required, want)
	}

	set, documented := readEnvExample(t)
	for v := range vars {
		if !documented[v] {
			t.Errorf(".env.example does not mention %s, which docker-compose.yml reads", v)
		}
	}
	for _, v := range required {
		if val, ok := set[v]; !ok || val != "" {
			t.Errorf(".env.example: %s should be there, empty, for the operator to fill in (it is %q)", v, val)
		}
	}

	if _, err := composeRun(t, set, "config", "-q"); err == nil {
		t.Fatal("docker-compose config accepted .env.example as it is, with the secrets empty")
	}
	for _, v := range required {
		env := with(map[string]string{v: ""})
		if _, err := composeRun(t, env, "config", "-q"); err == nil || !strings.Contains(err.Error(), v) {
			t.Errorf("%s empty: docker-compose config should refuse naming it; got %v", v, err)
		}
	}
	env := set
	for k, v := range testSecrets {
		env[k] = v
	}
	if _, err := composeRun(t, env, "config", "-q"); err != nil {
		t.Fatalf(".env.example with its secrets filled in: %v", err)
	}
}

// yamlCode is src without its comments (a "#" at the start of a line or
// after a blank).
func yamlCode(src string) string {
	var b strings.Builder
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if i := strings.Index(line, " #"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line + "\n")
	}
	return b.String()
}

// readEnvExample returns .env.example's assignments and every variable it
// mentions, assigned or in a commented-out assignment.
func readEnvExample(t *testing.T) (set map[string]string, documented map[string]bool) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, ".env.example"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set, documented = map[string]string{}, map[string]bool{}
	assign := regexp.MustCompile(`^(#?)\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)$`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		m := assign.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		documented[m[2]] = true
		if m[1] == "" {
			set[m[2]] = m[3]
		}
	}
	return set, documented
}

// Every setting of internal/config is documented in docker-compose.yml.
func TestCompose_documentsEverySetting(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var comments strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		if _, c, ok := strings.Cut(line, "#"); ok {
			comments.WriteString(c + "\n")
		}
	}
	for v := range configVars() {
		if !regexp.MustCompile(`\b` + v + `\b`).MatchString(comments.String()) {
			t.Errorf("docker-compose.yml: no comment explains %s (a setting of internal/config)", v)
		}
	}
}

// configVars are the environment variables internal/config reads.
func configVars() map[string]bool {
	vars := map[string]bool{}
	t := reflect.TypeFor[config.Config]()
	for i := range t.NumField() {
		if name := t.Field(i).Tag.Get("env"); name != "" {
			vars[strings.Split(name, ",")[0]] = true
		}
	}
	return vars
}
