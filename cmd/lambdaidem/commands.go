package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lambdaidem/go-lambdaidem/dynamo"
	"github.com/lambdaidem/go-lambdaidem/lambdaidem"
)

// openStatuses are the statuses in the sparse index, in listing order.
var openStatuses = []lambdaidem.Status{lambdaidem.StatusInProgress, lambdaidem.StatusFailed, lambdaidem.StatusDeadLettered}

// ---- get ----

func getCmd() *command {
	return &command{
		name: "get", args: "KEY",
		summary: "Show the record of KEY: status, lease (valid or expired), attempts, times, last error,\ndead-letter details. Reads with a strongly consistent read.",
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			_, _, r, now, err := a.record(ctx, c, args)
			if err != nil {
				return err
			}
			if c.json {
				a.writeJSON(toJSON(r, now))
				return nil
			}
			writeRecord(a.stdout, c.table, r, now)
			return nil
		},
	}
}

// ---- list ----

type listFlags struct {
	statuses     statusList
	stuck        bool
	failed       bool
	deadLettered bool
	olderThan    time.Duration
	limit        int
	pageSize     int
	quiet        bool
}

// statusList collects -status values (repeatable, or comma-separated).
type statusList []lambdaidem.Status

func (s *statusList) String() string { return fmt.Sprint([]lambdaidem.Status(*s)) }

func (s *statusList) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		st := lambdaidem.Status(strings.ToUpper(strings.TrimSpace(part)))
		switch st {
		case lambdaidem.StatusInProgress, lambdaidem.StatusFailed, lambdaidem.StatusDeadLettered:
			*s = append(*s, st)
		case lambdaidem.StatusCompleted:
			return errors.New("COMPLETED records are not in the open index; use \"get KEY\" for one, \"stats -all\" to count them")
		default:
			return fmt.Errorf("unknown status %q (IN_PROGRESS, FAILED or DEAD_LETTERED)", part)
		}
	}
	return nil
}

// listJSON is list's -json output.
type listJSON struct {
	Table     string       `json:"table"`
	Namespace string       `json:"namespace,omitempty"`
	Records   []recordJSON `json:"records"`
	// More is true when -limit cut the listing short.
	More bool `json:"more"`
}

func listCmd() *command {
	lf := &listFlags{}
	return &command{
		name: "list",
		summary: `List unfinished records, least recently updated first. Reads the sparse index
(one Query per status), never the whole table; COMPLETED records are not listed.
Without filters it lists IN_PROGRESS, FAILED and DEAD_LETTERED records. The index
lags the table by a moment: "get KEY" before acting on a row.`,
		flags: func(fs *flag.FlagSet) {
			fs.Var(&lf.statuses, "status", "only these `statuses`: IN_PROGRESS, FAILED, DEAD_LETTERED (repeatable or comma-separated)")
			fs.BoolVar(&lf.stuck, "stuck", false, "IN_PROGRESS records whose lease has expired (a crashed or timed-out holder)")
			fs.BoolVar(&lf.failed, "failed", false, "FAILED records (same as -status FAILED)")
			fs.BoolVar(&lf.deadLettered, "dead-lettered", false, "DEAD_LETTERED records (same as -status DEAD_LETTERED)")
			fs.DurationVar(&lf.olderThan, "older-than", 0, "only records last updated longer ago than this `duration`, e.g. 1h")
			fs.IntVar(&lf.limit, "limit", 100, "print at most `n` records (0: all)")
			fs.IntVar(&lf.pageSize, "page-size", 100, "index entries per Query `page`")
			fs.BoolVar(&lf.quiet, "quiet", false, "no progress lines on stderr")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			return a.list(ctx, c, lf, args)
		},
	}
}

func (a *app) list(ctx context.Context, c *common, lf *listFlags, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected arguments %q", args)
	}
	if lf.limit < 0 || lf.olderThan < 0 || lf.pageSize < 1 {
		return usagef("-limit and -older-than must not be negative, -page-size must be positive")
	}
	want := map[lambdaidem.Status]bool{}
	for _, s := range lf.statuses {
		want[s] = true
	}
	if lf.failed {
		want[lambdaidem.StatusFailed] = true
	}
	if lf.deadLettered {
		want[lambdaidem.StatusDeadLettered] = true
	}
	if lf.stuck {
		want[lambdaidem.StatusInProgress] = true
	}
	if len(want) == 0 {
		for _, s := range openStatuses {
			want[s] = true
		}
	}

	var current lambdaidem.Status
	pages, entries := 0, 0
	report := func(items int) {
		pages++
		entries += items
		if pages > 1 && !lf.quiet {
			a.progressf("list: %s: %d pages read, %d index entries", current, pages, entries)
		}
	}
	st, err := a.admin(ctx, c, report)
	if err != nil {
		return err
	}
	now := a.now()
	var before time.Time
	if lf.olderThan > 0 {
		before = now.Add(-lf.olderThan)
	}
	// Each status streams oldest first; the first n of each are enough to
	// find the oldest n overall.
	var rows []lambdaidem.Record
	more := false
	for _, status := range openStatuses {
		if !want[status] {
			continue
		}
		current, pages, entries = status, 0, 0
		n := 0
		for r, err := range st.ListOpen(ctx, dynamo.ListOpenRequest{Status: status, Namespace: c.namespace, UpdatedBefore: before, Now: now, PageSize: int32(min(lf.pageSize, 1<<20))}) {
			if err != nil {
				return fmt.Errorf("list %s records of table %s: %w", status, c.table, err)
			}
			if status == lambdaidem.StatusInProgress && lf.stuck && !r.LeaseUntil.Before(now) {
				continue
			}
			if lf.limit > 0 && n == lf.limit {
				more = true
				break
			}
			rows = append(rows, r)
			n++
		}
	}
	slices.SortStableFunc(rows, func(x, y lambdaidem.Record) int { return x.UpdatedAt.Compare(y.UpdatedAt) })
	if lf.limit > 0 && len(rows) > lf.limit {
		rows, more = rows[:lf.limit], true
	}

	if c.json {
		out := listJSON{Table: c.table, Namespace: c.namespace, Records: []recordJSON{}, More: more}
		for _, r := range rows {
			out.Records = append(out.Records, toJSON(r, now))
		}
		a.writeJSON(out)
	} else {
		a.writeTable(c, rows, now)
	}
	if more && !lf.quiet {
		a.progressf("list: stopped at -limit %d; more records match (-limit 0 lists all)", lf.limit)
	}
	return nil
}

func (a *app) writeTable(c *common, rows []lambdaidem.Record, now time.Time) {
	if len(rows) == 0 {
		fmt.Fprintf(a.stdout, "no matching records in table %s\n", safe(c.table))
		return
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	allNS := c.namespace == ""
	header := "STATUS\t"
	if allNS {
		header += "NAMESPACE\t"
	}
	fmt.Fprintln(tw, header+"KEY\tATTEMPTS\tUPDATED\tLEASE\tDETAIL")
	for _, r := range rows {
		lease := "-"
		switch leaseState(r, now) {
		case leaseValid:
			lease = "valid, ends " + relative(r.LeaseUntil, now)
		case leaseExpired:
			lease = "EXPIRED " + relative(r.LeaseUntil, now)
		}
		row := safe(string(r.Status)) + "\t"
		if allNS {
			row += safe(r.Namespace) + "\t"
		}
		fmt.Fprintf(tw, "%s%s\t%d\t%s\t%s\t%s\n", row, safe(r.Key), r.Attempts, when(r.UpdatedAt, now), lease, safe(orDash(listDetail(r))))
	}
	_ = tw.Flush()
}

// listDetail is list's DETAIL column: the last error's first line, after
// the dead-letter reason unless the error already starts with it (a
// poison error reads "poison: ...").
func listDetail(r lambdaidem.Record) string {
	detail := oneLine(r.LastError, 60)
	reason := string(r.DeadLetterReason)
	if r.Status != lambdaidem.StatusDeadLettered || reason == "" || strings.HasPrefix(detail, reason+":") {
		return detail
	}
	return strings.TrimSuffix(reason+": "+detail, ": ")
}

// storedForm turns a KEY argument into the key as stored: a hashed form
// as list shows it ("sha256:" and 64 hex digits) is used as typed; any
// other key goes through lambdaidem.StoredKey, so the original of a long
// key finds its record too.
func storedForm(key string) string {
	if h, ok := strings.CutPrefix(key, lambdaidem.HashedKeyPrefix); ok && len(h) == 64 && strings.Trim(h, "0123456789abcdef") == "" {
		return key
	}
	return lambdaidem.StoredKey(key)
}

// ---- release ----

type releaseJSON struct {
	Released bool       `json:"released"`
	Forced   bool       `json:"forced"`
	Record   recordJSON `json:"record"`
}

func releaseCmd() *command {
	var force bool
	var note string
	return &command{
		name: "release", args: "KEY",
		summary: `Clear a stuck lease: an IN_PROGRESS record whose lease has expired (its holder
crashed or timed out) becomes FAILED, keeping its attempt count, so the next
delivery of the message runs it again. The write is conditioned on the lease
token just read, so a claim made in between is never clobbered. A lease that is
still valid is refused (exit 4) unless -force: its holder may still be working,
and forcing makes its outcome be refused and the message run again.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&force, "force", false, "release even a lease that is still valid")
			fs.StringVar(&note, "note", "lease released by operator", "`text` stored as the record's last error")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			key, st, r, now, err := a.record(ctx, c, args)
			if err != nil {
				return err
			}
			if r.Status != lambdaidem.StatusInProgress {
				return refusef("%s is %s, not IN_PROGRESS: there is no lease to release (\"forget\" makes a key run again)", c.where(key), r.Status)
			}
			if leaseState(r, now) == leaseValid && !force {
				return refusef("the lease on %s is still valid until %s, held by message %s; its holder may still be running. Wait, or use -force",
					c.where(key), when(r.LeaseUntil, now), orDash(r.MessageID))
			}
			out, err := st.Release(ctx, dynamo.ReleaseRequest{Namespace: c.namespace, Key: key, Token: r.LeaseToken, Now: now, Force: force, Note: note})
			if err != nil {
				return fmt.Errorf("release %s: %w", c.where(key), err)
			}
			if c.json {
				a.writeJSON(releaseJSON{Released: true, Forced: force, Record: toJSON(out, now)})
				return nil
			}
			fmt.Fprintf(a.stdout, "released %s: now FAILED after %s; the next delivery of its message runs it again\n", c.where(key), attempts(out.Attempts))
			return nil
		},
	}
}

// ---- forget ----

type forgetJSON struct {
	Forgotten bool       `json:"forgotten"`
	Record    recordJSON `json:"record"`
}

func forgetCmd() *command {
	var yes, force bool
	return &command{
		name: "forget", args: "KEY",
		summary: `Delete the record of KEY, so that the next message with this key runs the handler
again (a completed key is no longer a duplicate; a dead-lettered one is no longer
refused). Asks for confirmation on a terminal; elsewhere -yes is required. A
record with a valid lease is refused unless -force. Warm function instances
with the local completed-key cache on may still skip the key until their cache
entry ends.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&yes, "yes", false, "do not ask for confirmation")
			fs.BoolVar(&force, "force", false, "forget even a record whose lease is still valid")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			key, st, r, now, err := a.record(ctx, c, args)
			if err != nil {
				return err
			}
			if leaseState(r, now) == leaseValid && !force {
				return refusef("the lease on %s is still valid until %s; its holder may still be running. Wait, or use -force",
					c.where(key), when(r.LeaseUntil, now))
			}
			if !yes {
				ok, err := a.confirm(fmt.Sprintf("Forget %s (%s, %s)?", c.where(key), r.Status, attempts(r.Attempts)))
				if err != nil {
					return err
				}
				if !ok {
					return refusef("not confirmed: %s kept", c.where(key))
				}
			}
			out, err := st.Forget(ctx, dynamo.ForgetRequest{Namespace: c.namespace, Key: key, Now: now, Force: force})
			if err != nil {
				return fmt.Errorf("forget %s: %w", c.where(key), err)
			}
			if c.json {
				a.writeJSON(forgetJSON{Forgotten: true, Record: toJSON(out, now)})
				return nil
			}
			fmt.Fprintf(a.stdout, "forgot %s (was %s after %s); the next message with this key runs the handler again\n", c.where(key), out.Status, attempts(out.Attempts))
			return nil
		},
	}
}

// ---- stats ----

type statsJSON struct {
	Table     string `json:"table"`
	Namespace string `json:"namespace,omitempty"`
	// Counts maps each status to its count; COMPLETED is null unless -all.
	Counts map[lambdaidem.Status]*int `json:"counts"`
	// Stuck counts IN_PROGRESS records whose lease has expired.
	Stuck int `json:"stuck"`
}

func statsCmd() *command {
	var all, quiet bool
	return &command{
		name: "stats",
		summary: `Count records by status. IN_PROGRESS, FAILED and DEAD_LETTERED come from the
sparse index; COMPLETED records are not in it, so counting them scans the whole
table (read capacity in proportion to its size): only with -all.`,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&all, "all", false, "also count COMPLETED records with a full table scan")
			fs.BoolVar(&quiet, "quiet", false, "no progress lines on stderr")
		},
		run: func(ctx context.Context, a *app, c *common, args []string) error {
			if len(args) > 0 {
				return usagef("unexpected arguments %q", args)
			}
			st, err := a.admin(ctx, c, nil)
			if err != nil {
				return err
			}
			now := a.now()
			out := statsJSON{Table: c.table, Namespace: c.namespace, Counts: map[lambdaidem.Status]*int{lambdaidem.StatusCompleted: nil}}
			count := func(req dynamo.CountRequest, always bool) (int, error) {
				req.Namespace, req.Now = c.namespace, now
				if !quiet {
					req.Progress = func(p dynamo.CountProgress) {
						if always || p.Pages > 1 {
							a.progressf("stats: %s: %d pages, %d items read, %d counted", req.Status, p.Pages, p.Scanned, p.Counted)
						}
					}
				}
				n, err := st.Count(ctx, req)
				if err != nil {
					return n, fmt.Errorf("count %s records of table %s: %w", req.Status, c.table, err)
				}
				return n, nil
			}
			for _, s := range openStatuses {
				n, err := count(dynamo.CountRequest{Status: s}, false)
				if err != nil {
					return err
				}
				out.Counts[s] = &n
			}
			if *out.Counts[lambdaidem.StatusInProgress] > 0 {
				if out.Stuck, err = count(dynamo.CountRequest{Status: lambdaidem.StatusInProgress, LeaseEndedBefore: now}, false); err != nil {
					return err
				}
			}
			if all {
				n, err := count(dynamo.CountRequest{Status: lambdaidem.StatusCompleted}, true)
				if err != nil {
					return err
				}
				out.Counts[lambdaidem.StatusCompleted] = &n
			}
			if c.json {
				a.writeJSON(out)
				return nil
			}
			a.writeStats(out)
			return nil
		},
	}
}

func (a *app) writeStats(s statsJSON) {
	fmt.Fprintf(a.stdout, "table      %s\nnamespace  %s\n\n", safe(s.Table), cmp.Or(safe(s.Namespace), "(all)"))
	var buf strings.Builder
	tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tRECORDS\t\t")
	for _, st := range append(slices.Clone(openStatuses), lambdaidem.StatusCompleted) {
		n := s.Counts[st]
		switch {
		case n == nil:
			fmt.Fprintf(tw, "%s\t-\tnot counted: a full table scan (-all)\t\n", st)
		case st == lambdaidem.StatusInProgress && s.Stuck > 0:
			fmt.Fprintf(tw, "%s\t%d\t%d stuck (lease expired)\t\n", st, *n, s.Stuck)
		default:
			fmt.Fprintf(tw, "%s\t%d\t\t\n", st, *n)
		}
	}
	_ = tw.Flush()
	fmt.Fprint(a.stdout, trimLines(buf.String()))
}

// record reads the record of the command's KEY argument: the key, the
// store it was read from, the record and the time it was read at.
func (a *app) record(ctx context.Context, c *common, args []string) (string, adminStore, lambdaidem.Record, time.Time, error) {
	key, err := c.needKey(args)
	if err != nil {
		return "", nil, lambdaidem.Record{}, time.Time{}, err
	}
	if c.namespace == "" {
		c.namespace = defaultNamespace(a.env)
		a.progressf("no -namespace or LAMBDAIDEM_NAMESPACE: using %q, the library's default", c.namespace)
	}
	key = storedForm(key)
	st, err := a.admin(ctx, c, nil)
	if err != nil {
		return "", nil, lambdaidem.Record{}, time.Time{}, err
	}
	now := a.now()
	r, err := st.Get(ctx, lambdaidem.GetRequest{Namespace: c.namespace, Key: key, Now: now})
	if errors.Is(err, lambdaidem.ErrNotFound) {
		return "", nil, lambdaidem.Record{}, time.Time{}, fmt.Errorf("no record for %s (never seen, forgotten, or expired): %w", c.where(key), lambdaidem.ErrNotFound)
	}
	if err != nil {
		return "", nil, lambdaidem.Record{}, time.Time{}, fmt.Errorf("read %s: %w", c.where(key), err)
	}
	return key, st, r, now, nil
}
