/* rshuffled as a child process of a test (rshuffled_child.h). */
#include "rshuffled_child.h"

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#define ARGS_MAX 16

pid_t rsd_start(const char *const *args, const char *const *env, char *addr, size_t cap)
{
    const char *host = getenv("RSHUFFLE_TEST_HOST") ? getenv("RSHUFFLE_TEST_HOST") : "127.0.0.1";
    char listen[128];
    snprintf(listen, sizeof(listen), "%s:0", host);
    char *argv[ARGS_MAX] = {"rshuffled", "--listen", listen};
    int argc = 3;
    for (; args != NULL && args[argc - 3] != NULL; argc++) {
        assert_true(argc < ARGS_MAX - 1);
        memcpy(&argv[argc], &args[argc - 3], sizeof(char *)); /* execv's argv is not const */
    }
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
        dup2(p[1], STDOUT_FILENO);
        close(p[0]);
        close(p[1]);
        for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
            char var[512];
            snprintf(var, sizeof(var), "%s", env[i]);
            char *eq = strchr(var, '=');
            if (eq == NULL)
                _exit(126);
            *eq = '\0';
            setenv(var, eq + 1, 1);
        }
        execv(RSHUFFLED_PATH, argv);
        _exit(127);
    }
    close(p[1]);
    FILE *f = fdopen(p[0], "r");
    char line[256] = {0};
    assert_non_null(fgets(line, sizeof(line), f));
    fclose(f);
    const char *pfx = "rshuffled: listening on ";
    assert_memory_equal(line, pfx, strlen(pfx));
    snprintf(addr, cap, "%.*s", (int)strcspn(line + strlen(pfx), "\n"), line + strlen(pfx));
    return pid;
}

void rsd_kill(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}
