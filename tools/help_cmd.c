/* dptrain help: the command line's reference, made from the commands'
 * tables and the option list, for the build and for maintainers (dptrain
 * --help does not list it):
 *   dptrain help --markdown        docs/cli.md (the cli-docs target writes it)
 *   dptrain help --man [COMMAND]   the man page dptrain-COMMAND(1), or dptrain(1)
 *   dptrain help --commands        the commands' names, one a line
 *   dptrain help [COMMAND]         what COMMAND --help (or dptrain --help) prints */
#include "cli.h"

#include <stdio.h>
#include <string.h>

static const cli_command *find(const char *name)
{
    for (const cli_command *const *c = cli_commands(); *c; c++)
        if (strcmp((*c)->name, name) == 0)
            return *c;
    return NULL;
}

int cli_help_run(int argc, char **argv)
{
    if (argc == 1 && strcmp(argv[0], "--commands") == 0) {
        for (const cli_command *const *c = cli_commands(); *c; c++)
            printf("%s\n", (*c)->name);
        return 0;
    }
    bool markdown = argc > 0 && strcmp(argv[0], "--markdown") == 0;
    bool man = argc > 0 && strcmp(argv[0], "--man") == 0;
    const char *name = argc > (man ? 1 : 0) ? argv[man ? 1 : 0] : NULL;
    const cli_command *c = name ? find(name) : NULL;
    if ((markdown && argc > 1) || (name && !c && !markdown) || argc > 2) {
        fprintf(stderr, "dptrain: error: usage: dptrain help [--markdown | --man [COMMAND] | "
                        "--commands | COMMAND]\n");
        return 2;
    }
    if (markdown)
        cli_print_markdown(stdout);
    else if (man)
        cli_print_man(c, stdout);
    else
        cli_print_help(c, stdout);
    return ferror(stdout) ? 1 : 0;
}
