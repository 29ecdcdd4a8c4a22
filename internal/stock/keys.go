package stock

import "strconv"

// Every Redis name of an activity's stock is built here, under the hash tag
// {act:<id>} so each script touches one Redis Cluster slot.

type keys struct {
	meta, stock, users, reserved string
	restock                      string // pub/sub channel: units came back to a sold-out sale
}

func keysFor(activityID int64) keys {
	base := "fs:{act:" + strconv.FormatInt(activityID, 10) + "}"
	return keys{
		meta:     base + ":meta",
		stock:    base + ":stock",
		users:    base + ":users",
		reserved: base + ":reserved",
		restock:  base + ":restock",
	}
}

func (k keys) all() []string { return []string{k.meta, k.stock, k.users, k.reserved} }

// restockPattern matches every activity's restock channel.
const restockPattern = "fs:{act:*}:restock"

// activityOfChannel reads the activity id back out of a restock channel name.
func activityOfChannel(ch string) (int64, bool) {
	const prefix, suffix = "fs:{act:", "}:restock"
	if len(ch) <= len(prefix)+len(suffix) || ch[:len(prefix)] != prefix || ch[len(ch)-len(suffix):] != suffix {
		return 0, false
	}
	id, err := strconv.ParseInt(ch[len(prefix):len(ch)-len(suffix)], 10, 64)
	return id, err == nil
}
