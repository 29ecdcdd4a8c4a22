package deploy

import (
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, COPY, RUN, …
	args string
}

// stage is one FROM and what follows it.
type stage struct {
	image, name string
	body        []instruction
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.body {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (s stage) last(cmd string) (instruction, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return instruction{}, false
	}
	return all[len(all)-1], true
}

func readDockerfile(t *testing.T) []stage {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var cur strings.Builder
	flush := func() {
		line := strings.TrimSpace(cur.String())
		cur.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			st := stage{image: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
			return
		}
		if len(stages) == 0 {
			t.Fatalf("Dockerfile: %s before FROM", in.cmd)
		}
		stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
	}
	for _, line := range strings.Split(string(src), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if l, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		flush()
	}
	flush()
	return stages
}

// copyArgs splits COPY's arguments into its --flags, sources and destination.
func copyArgs(t *testing.T, args string) (flags map[string]string, srcs []string, dst string) {
	t.Helper()
	var words []string
	if strings.HasPrefix(args, "[") {
		if err := json.Unmarshal([]byte(args), &words); err != nil {
			t.Fatalf("COPY %s: %v", args, err)
		}
	} else {
		words = strings.Fields(args)
	}
	flags = map[string]string{}
	for len(words) > 0 && strings.HasPrefix(words[0], "--") {
		k, v, _ := strings.Cut(strings.TrimPrefix(words[0], "--"), "=")
		flags[k] = v
		words = words[1:]
	}
	if len(words) < 2 {
		t.Fatalf("COPY %s: want sources and a destination", args)
	}
	return flags, words[:len(words)-1], words[len(words)-1]
}

// The image: a Go build stage on the Go version go.mod names, dependencies
// downloaded before the sources are copied (a layer cached until go.mod or
// go.sum change), and a distroless static final stage running as a non-root
// user the two binaries, on the ports the compose file uses.
func TestDockerfile_stages(t *testing.T) {
	stages := readDockerfile(t)
	if len(stages) != 2 {
		t.Fatalf("Dockerfile: %d stages; want a build stage and the final one", len(stages))
	}
	build, final := stages[0], stages[1]

	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\d+\.\d+)(\.\d+)?\s*$`).FindSubmatch(mod)
	if goLine == nil {
		t.Fatal("go.mod: no go directive")
	}
	if want := "golang:" + string(goLine[1]) + "-"; !strings.HasPrefix(build.image, want) {
		t.Errorf("build stage FROM %s; want %s… (go.mod: go %s%s)", build.image, want, goLine[1], goLine[2])
	}
	if build.name == "" {
		t.Error("build stage has no name (FROM … AS build)")
	}

	// Dependencies first.
	var order []string
	for _, in := range build.body {
		switch {
		case in.cmd == "COPY":
			_, srcs, _ := copyArgs(t, in.args)
			order = append(order, "COPY "+strings.Join(srcs, " "))
		case in.cmd == "RUN" && strings.Contains(in.args, "go mod download"):
			order = append(order, "download")
		case in.cmd == "RUN" && strings.Contains(in.args, "go build"):
			order = append(order, "build")
		}
	}
	if len(order) < 4 || order[0] != "COPY go.mod go.sum" || order[1] != "download" || order[len(order)-1] != "build" {
		t.Errorf("build stage order %q; want COPY go.mod go.sum, go mod download, then the sources, then go build", order)
	}
	if build.all("USER") != nil {
		t.Error("build stage: USER is for the final stage")
	}

	if final.image != "gcr.io/distroless/static-debian12:nonroot" {
		t.Errorf("final stage FROM %s; want gcr.io/distroless/static-debian12:nonroot", final.image)
	}
	user, ok := final.last("USER")
	uid, _, _ := strings.Cut(user.args, ":")
	if n, err := strconv.Atoi(uid); !ok || err != nil || n == 0 {
		t.Errorf("final stage USER %q; want a numeric non-root uid (distroless nonroot is 65532)", user.args)
	}

	installed := finalBinaries(t, final, build.name)
	entry, ok := final.last("ENTRYPOINT")
	var argv []string
	if !ok || json.Unmarshal([]byte(entry.args), &argv) != nil || len(argv) == 0 || !installed[argv[0]] {
		t.Errorf("ENTRYPOINT %s: want the exec form of a binary the image has (%v); there is no shell", entry.args, installed)
	}
	for _, bin := range []string{apiBinary, workerBinary} {
		if !installed[bin] {
			t.Errorf("the image has no %s, which docker-compose.yml runs (%v)", bin, installed)
		}
	}

	var exposed []string
	for _, in := range final.all("EXPOSE") {
		exposed = append(exposed, strings.Fields(in.args)...)
	}
	c := loadCompose(t, testSecrets)
	tp := roles(t, c)
	for _, addr := range []string{tp.apiAddr, tp.workerAddr} {
		if p := portOf(t, addr); !slices.Contains(exposed, p) && !slices.Contains(exposed, p+"/tcp") {
			t.Errorf("EXPOSE %v: not %s, where a program of the image listens (%s)", exposed, p, addr)
		}
	}
}

// finalBinaries are the paths the final stage copies from the build stage.
func finalBinaries(t *testing.T, final stage, from string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, in := range final.all("COPY") {
		flags, srcs, dst := copyArgs(t, in.args)
		if flags["from"] != from {
			continue
		}
		for _, src := range srcs {
			if strings.HasSuffix(dst, "/") || len(srcs) > 1 {
				out[path.Join(dst, path.Base(src))] = true
			} else {
				out[dst] = true
			}
		}
	}
	return out
}

// The build stage, replayed without Docker: the context .dockerignore lets
// through, the stage's COPYs into a temp dir, its RUNs with the local Go
// toolchain (offline: the module cache only). The binaries must build from
// exactly that, be static, carry the -trimpath and CGO_ENABLED=0 settings,
// and run.
func TestDockerfile_buildStageBuildsStaticBinaries(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go is not on PATH: %v", err)
	}
	stages := readDockerfile(t)
	build, final := stages[0], stages[len(stages)-1]
	ignore := readDockerignore(t)
	ctxRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	// The replay is offline, but the module cache holds only what earlier
	// builds needed, and `go mod download` in the Dockerfile wants every
	// module go.mod lists (some only tests of dependencies use): on a fresh
	// machine the replay failed on golang.org/x/mod. Fill the cache first,
	// through the configured proxy, as docker build would.
	dl := exec.Command(goBin, "mod", "download")
	dl.Dir = ctxRoot
	if out, err := dl.CombinedOutput(); err != nil {
		t.Fatalf("go mod download (filling the module cache for the offline replay): %v\n%s", err, out)
	}

	tmp := t.TempDir()
	// The image's absolute paths, here: WORKDIR and the build output.
	mapped := map[string]string{}
	workdir := tmp
	env := map[string]string{}
	outDirs := map[string]bool{}
	for _, in := range final.all("COPY") {
		flags, srcs, _ := copyArgs(t, in.args)
		if flags["from"] == build.name {
			for _, s := range srcs {
				outDirs[path.Dir(s)] = true
			}
		}
	}
	for d := range outDirs {
		mapped[d] = filepath.Join(tmp, "image"+d)
		if err := os.MkdirAll(mapped[d], 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, in := range build.body {
		switch in.cmd {
		case "WORKDIR":
			workdir = filepath.Join(tmp, "image"+path.Clean(in.args))
			mapped[path.Clean(in.args)] = workdir
			if err := os.MkdirAll(workdir, 0o755); err != nil {
				t.Fatal(err)
			}
		case "ENV":
			for _, kv := range strings.Fields(in.args) {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					t.Fatalf("ENV %s: use the KEY=value form", in.args)
				}
				env[k] = strings.Trim(v, `"`)
			}
		case "COPY":
			flags, srcs, dst := copyArgs(t, in.args)
			if len(flags) > 0 {
				t.Fatalf("COPY %s: flags in the build stage are not replayed by this test", in.args)
			}
			intoDir := strings.HasSuffix(dst, "/") || len(srcs) > 1
			if !path.IsAbs(dst) {
				dst = filepath.Join(workdir, dst)
			}
			for _, src := range srcs {
				copyFromContext(t, ctxRoot, ignore, path.Clean(src), dst, intoDir)
			}
		case "RUN":
			script := in.args
			for from, to := range mapped {
				script = regexp.MustCompile(regexp.QuoteMeta(from)+`\b`).ReplaceAllString(script, to)
			}
			cmd := exec.Command("sh", "-c", script)
			cmd.Dir = workdir
			cmd.Env = append(os.Environ(), "GOFLAGS=", "GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off", "PATH="+filepath.Dir(goBin)+":"+os.Getenv("PATH"))
			for k, v := range env {
				cmd.Env = append(cmd.Env, k+"="+v)
			}
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("RUN %s (in %s, offline): %v\n%s", in.args, workdir, err, out)
			}
		}
	}

	for bin := range finalBinaries(t, final, build.name) {
		name := path.Base(bin)
		var built string
		for d := range outDirs {
			if p := filepath.Join(mapped[d], name); fileExists(p) {
				built = p
			}
		}
		if built == "" {
			t.Fatalf("the build stage made no %s for the final stage's COPY", name)
		}
		checkStatic(t, built)
		bi, err := buildinfo.ReadFile(built)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if settings["-trimpath"] != "true" || settings["CGO_ENABLED"] != "0" {
			t.Errorf("%s: build settings -trimpath=%q CGO_ENABLED=%q; want true and 0", name, settings["-trimpath"], settings["CGO_ENABLED"])
		}
		// The image's health check: the subcommand is there and fails with
		// status 1 on an unreachable server.
		cmd := exec.Command(built, "healthcheck", "--url", "http://127.0.0.1:1/healthz")
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "unhealthy") {
			t.Errorf("%s healthcheck against nothing: %v\n%s; want exit status 1, unhealthy", name, err, out)
		}
	}
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// checkStatic fails unless the ELF file p needs no dynamic loader or library
// (distroless/static has no libc).
func checkStatic(t *testing.T, p string) {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s: dynamically linked (has an interpreter); want static (CGO_ENABLED=0)", p)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s: needs %v; want static", p, libs)
	}
}

// copyFromContext copies src (a file or directory of the context, as far as
// .dockerignore lets it through) to dst, the way COPY does: a directory's
// contents, not the directory itself; into dst when it is a directory.
func copyFromContext(t *testing.T, ctx string, ignore dockerignore, src, dst string, intoDir bool) {
	t.Helper()
	if ignore.ignored(src) {
		t.Fatalf("COPY %s: .dockerignore leaves it out of the build context", src)
	}
	info, err := os.Stat(filepath.Join(ctx, src))
	if err != nil {
		t.Fatalf("COPY %s: %v", src, err)
	}
	if !info.IsDir() {
		if intoDir {
			dst = filepath.Join(dst, path.Base(src))
		}
		copyFile(t, filepath.Join(ctx, src), dst)
		return
	}
	err = filepath.WalkDir(filepath.Join(ctx, src), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ctx, p)
		if d.IsDir() || ignore.ignored(filepath.ToSlash(rel)) {
			return nil
		}
		under, _ := filepath.Rel(filepath.Join(ctx, src), p)
		copyFile(t, p, filepath.Join(dst, under))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
