"""An SSH server on a loopback port for the tests of `cca sync` over SSH.

asyncssh (pinned, installed into build/ by `make sshd`) speaks SSH; the client is the system's
OpenSSH `ssh`, which git runs as it would for any remote. Each command a client asks for
(`git-upload-pack '/path'`, `git-receive-pack '/path'`) runs as the user running this server.
Only the throwaway key in AUTHORIZED_KEYS gets in.

Usage: python sshd.py HOST_KEY AUTHORIZED_KEYS
Prints the port it listens on, then serves until stdin closes (the test ends it so).
"""

import asyncio
import sys

import asyncssh


async def run_command(process):
    local = await asyncio.create_subprocess_shell(
        process.command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    await process.redirect(stdin=local.stdin, stdout=local.stdout, stderr=local.stderr)
    process.exit(await local.wait())
    await process.wait_closed()


async def main(host_key, authorized_keys):
    server = await asyncssh.create_server(
        asyncssh.SSHServer,
        "127.0.0.1",
        0,
        server_host_keys=[host_key],
        authorized_client_keys=authorized_keys,
        process_factory=run_command,
        encoding=None,
    )
    port = server.sockets[0].getsockname()[1]
    print(port, flush=True)
    # Ends when the test closes stdin (or dies).
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    server.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
