package stock

import (
	"os"
	"syscall"
)

// KillAfterTake makes k's transfers kill their own process (SIGKILL, as
// kill -9) between the take and the give: a mover dying mid-transfer.
func KillAfterTake(k *Keeper) {
	k.afterTake = func() { _ = syscall.Kill(os.Getpid(), syscall.SIGKILL) }
}
