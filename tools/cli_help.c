/* One printer for what the commands say about themselves (cli.h): each
 * command's --help, the command line's reference in Markdown
 * (docs/cli.md) and its man pages, all from the commands' tables and the
 * library's option list, so that none of them is written by hand. */
#include "cli.h"

#include "dp/dp.h"

#include <ctype.h>
#include <string.h>

enum { WIDTH = 79, FLAG_COLUMN = 23, COMMAND_COLUMN = 12 };

typedef enum { PLAIN, MARKDOWN, ROFF } style;

/* A growing string in a fixed buffer (cut short where it is full). */
typedef struct strbuf {
    char *buf;
    size_t size, len;
} strbuf;

static void put(strbuf *t, const char *s, size_t n)
{
    for (size_t i = 0; i < n && t->len + 1 < t->size; i++)
        t->buf[t->len++] = s[i];
    t->buf[t->len] = '\0';
}

static void puts_(strbuf *t, const char *s)
{
    put(t, s, strlen(s));
}

/* A character of text in the style: Markdown's emphasis and roff's escape
 * character are escaped, and in roff a flag's dashes (`code`); the rest is
 * itself. */
static void put_char(strbuf *t, char ch, style how, bool code)
{
    if (how == MARKDOWN && (ch == '*' || ch == '\\' || ch == '<'))
        put(t, "\\", 1);
    if (how == ROFF && ch == '\\')
        puts_(t, "\\e");
    else if (how == ROFF && code && ch == '-')
        puts_(t, "\\-");
    else
        put(t, &ch, 1);
}

/* The flag that names option `name`: c's own, else dptrain train's. */
static const char *flag_of(const cli_command *c, const char *name, size_t len)
{
    const cli_command *where[2] = {c, cli_train()};
    for (int w = 0; w < 2; w++) {
        for (int i = 0; where[w] && i < where[w]->noptions; i++) {
            const dp_option *o = &where[w]->options[i];
            if (o->flag && strlen(o->name) == len && strncmp(o->name, name, len) == 0)
                return o->flag;
        }
    }
    return NULL;
}

/* text, its `name`s of options shown as their flags, in the style. */
static void put_rendered(strbuf *t, const cli_command *c, const char *s, style how)
{
    while (*s) {
        const char *close = *s == '`' ? strchr(s + 1, '`') : NULL;
        if (!close) {
            put_char(t, *s, how, false);
            s++;
            continue;
        }
        const char *flag = flag_of(c, s + 1, (size_t)(close - s - 1));
        const char *code = flag ? flag : s + 1;
        size_t n = flag ? strlen(flag) : (size_t)(close - s - 1);
        if (how == PLAIN && flag) {
            puts_(t, flag);
        } else if (how == ROFF) {
            puts_(t, "\\fB");
            for (size_t i = 0; i < n; i++)
                put_char(t, code[i], ROFF, true);
            puts_(t, "\\fR");
        } else {
            puts_(t, "`");
            put(t, code, n);
            puts_(t, "`");
        }
        s = close + 1;
    }
}

const char *cli_with_flags(const cli_command *c, const char *msg, char *buf, size_t size)
{
    strbuf t = {buf, size, 0};
    buf[0] = '\0';
    put_rendered(&t, c, msg, PLAIN);
    return buf;
}

/* Words of s from column `at`, wrapped at WIDTH with lines after the
 * first indented to `indent`; ends the line. */
static void print_wrapped(FILE *out, const char *s, int at, int indent)
{
    int col = at;
    while (*s) {
        size_t word = strcspn(s, " ");
        if (col > indent && col + 1 + (int)word > WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', out);
            col++;
        }
        fwrite(s, 1, word, out);
        col += (int)word;
        s += word;
        while (*s == ' ')
            s++;
    }
    fputc('\n', out);
}

/* The default an option's help shows: its own [...] at its end, off for
 * a switch, else the default value's text. */
static bool own_default(const char *help)
{
    size_t n = strlen(help);
    return n > 0 && help[n - 1] == ']';
}

static const char *default_of(const cli_command *c, const dp_option *o, char *buf, size_t size)
{
    if (!o->metavar)
        return "off";
    return dp_option_format(o, c->defaults, buf, size);
}

/* An entry "  FLAG META   help [default]" of a --help, from its column. */
static void print_entry(FILE *out, const char *name, const char *help, int column)
{
    int at = fprintf(out, "  %s", name);
    if (at + 1 > column) {
        fprintf(out, "\n%*s", column, "");
    } else {
        fprintf(out, "%*s", column - at, "");
    }
    print_wrapped(out, help, column, column);
}

static void print_option(FILE *out, const cli_command *c, const dp_option *o)
{
    char name[96], help[2048], value[256];
    strbuf t = {help, sizeof help, 0};
    snprintf(name, sizeof name, "%s%s%s", o->flag, o->metavar ? " " : "",
             o->metavar ? o->metavar : "");
    put_rendered(&t, c, o->help, PLAIN);
    if (!own_default(o->help)) {
        puts_(&t, " [");
        puts_(&t, default_of(c, o, value, sizeof value));
        puts_(&t, "]");
    }
    print_entry(out, name, help, FLAG_COLUMN);
}

/* Whether option i of c is listed (it has a flag), and the heading it
 * starts: its group's, where the flag listed before it is in another
 * group (else NULL). */
static bool listed(const cli_command *c, int i, const char **heading)
{
    *heading = NULL;
    if (!c->options[i].flag)
        return false;
    const char *group = c->options[i].group_title, *before = NULL;
    for (int k = i - 1; k >= 0 && !before; k--)
        if (c->options[k].flag)
            before = c->options[k].group_title ? c->options[k].group_title : "";
    if (group && (!before || strcmp(before, group) != 0))
        *heading = group;
    return true;
}

static void print_main_help(FILE *out)
{
    fputs("usage: dptrain <command> [options]\n\n"
          "Trains convolutional networks data-parallel across devices.\n\n"
          "commands:\n",
          out);
    for (const cli_command *const *c = cli_commands(); *c; c++)
        print_entry(out, (*c)->name, (*c)->summary, COMMAND_COLUMN);
    fputs("\noptions:\n"
          "  -h, --help     show this help\n"
          "  --version      print the version\n",
          out);
}

void cli_print_help(const cli_command *c, FILE *out)
{
    if (!c) {
        print_main_help(out);
        return;
    }
    fprintf(out, "usage: %s\n\n%s\n", c->usage, c->about);
    for (int i = 0; i < c->nargs; i++) {
        if (i == 0)
            fputc('\n', out);
        print_entry(out, c->args[i].name, c->args[i].help, FLAG_COLUMN);
    }
    fputs("\noptions (default in brackets):\n", out);
    bool grouped = false;
    for (int i = 0; i < c->noptions; i++) {
        const char *heading;
        if (!listed(c, i, &heading))
            continue;
        if (heading)
            fprintf(out, "\n%s:\n", heading);
        grouped = grouped || heading;
        print_option(out, c, &c->options[i]);
    }
    fprintf(out, "%s  -h, --help           show this help\n", grouped ? "\n" : "");
}

/* ---- Markdown: docs/cli.md ----------------------------------------------- */

/* A paragraph of about text: its lines joined. */
static void put_paragraphs(strbuf *t, const cli_command *c, const char *about, style how)
{
    char line[4096];
    for (const char *p = about; *p;) {
        size_t n = strcspn(p, "\n");
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        if (n == 0)
            puts_(t, how == ROFF ? "\n.PP\n" : "\n\n");
        else {
            if (t->len > 0 && t->buf[t->len - 1] != '\n')
                puts_(t, " ");
            if (how == ROFF && (line[0] == '.' || line[0] == '\''))
                puts_(t, "\\&");
            put_rendered(t, c, line, how);
        }
        p += n;
        if (*p == '\n')
            p++;
    }
}

static void markdown_command(FILE *out, const cli_command *c)
{
    static char body[16384];
    strbuf t = {body, sizeof body, 0};
    put_paragraphs(&t, c, c->about, MARKDOWN);
    fprintf(out, "\n## dptrain %s\n\n`%s`\n\n%s\n", c->name, c->usage, body);
    for (int i = 0; i < c->nargs; i++) {
        t.len = 0;
        put_rendered(&t, c, c->args[i].help, MARKDOWN);
        fprintf(out, "%s- `%s`: %s\n", i == 0 ? "\n### Arguments\n\n" : "", c->args[i].name, body);
    }
    bool any = false;
    for (int i = 0; i < c->noptions; i++) {
        const dp_option *o = &c->options[i];
        const char *heading;
        char value[256];
        if (!listed(c, i, &heading))
            continue;
        if (heading)
            fprintf(out, "\n### %c%s\n\n", toupper((unsigned char)heading[0]), heading + 1);
        else if (!any)
            fputs("\n### Options\n\n", out);
        any = true;
        t.len = 0;
        put_rendered(&t, c, o->help, MARKDOWN);
        fprintf(out, "- `%s%s%s`: %s", o->flag, o->metavar ? " " : "", o->metavar ? o->metavar : "",
                body);
        if (!own_default(o->help))
            fprintf(out, " [%s]", default_of(c, o, value, sizeof value));
        fputs("\n", out);
    }
}

void cli_print_markdown(FILE *out)
{
    fputs("# The dptrain command line\n\n"
          "<!-- Made by `dptrain help --markdown` from the option lists "
          "(include/dp/train_option_list.h, tools/*_cmd.c): edit those, then run `cmake --build "
          "build --target cli-docs`. tests/tools/cli_docs.sh fails when this file differs. -->\n\n"
          "`dptrain <command> [options]` trains convolutional networks data-parallel across "
          "devices. Each command's flags follow, with their defaults in brackets; `dptrain "
          "COMMAND --help` prints the same, and `man dptrain-COMMAND` after `make install`.\n\n"
          "| command | what it does |\n| --- | --- |\n",
          out);
    for (const cli_command *const *c = cli_commands(); *c; c++)
        fprintf(out, "| [%s](#dptrain-%s) | %s |\n", (*c)->name, (*c)->name, (*c)->summary);
    for (const cli_command *const *c = cli_commands(); *c; c++)
        markdown_command(out, *c);
}

/* ---- roff: the man pages -------------------------------------------------- */

static void roff(FILE *out, const cli_command *c, const char *s)
{
    static char buf[16384];
    strbuf t = {buf, sizeof buf, 0};
    put_rendered(&t, c, s, ROFF);
    fputs(buf, out);
}

/* A flag or another piece of code: its dashes are minus signs. */
static void roff_code(FILE *out, const char *s)
{
    static char buf[512];
    strbuf t = {buf, sizeof buf, 0};
    for (; *s; s++)
        put_char(&t, *s, ROFF, true);
    fputs(buf, out);
}

static void man_header(FILE *out, const char *page, const char *summary)
{
    char upper[64];
    size_t i = 0;
    for (; page[i] && i + 1 < sizeof upper; i++)
        upper[i] = (char)toupper((unsigned char)page[i]);
    upper[i] = '\0';
    fprintf(out, ".TH %s 1 \"\" \"dptrain %s\" \"dptrain manual\"\n.SH NAME\n", upper,
            DP_VERSION_STRING);
    roff(out, NULL, page);
    fputs(" \\- ", out);
    roff(out, NULL, summary);
    fputs("\n", out);
}

void cli_print_man(const cli_command *c, FILE *out)
{
    if (!c) {
        man_header(out, "dptrain", "train convolutional networks data-parallel across devices");
        fputs(".SH SYNOPSIS\n.B dptrain\n\\fICOMMAND\\fR [\\fIoptions\\fR]\n.SH COMMANDS\n", out);
        for (const cli_command *const *k = cli_commands(); *k; k++) {
            fprintf(out, ".TP\n.B %s\n", (*k)->name);
            roff(out, *k, (*k)->summary);
            fprintf(out, " (\\fBdptrain\\-%s\\fR(1))\n", (*k)->name);
        }
        fputs(".SH OPTIONS\n.TP\n.B \\-h, \\-\\-help\nshow the commands\n.TP\n"
              ".B \\-\\-version\nprint the version\n.SH SEE ALSO\n",
              out);
        for (const cli_command *const *k = cli_commands(); *k; k++)
            fprintf(out, "\\fBdptrain\\-%s\\fR(1)%s\n", (*k)->name, k[1] ? "," : "");
        return;
    }
    char page[64];
    snprintf(page, sizeof page, "dptrain-%s", c->name);
    man_header(out, page, c->summary);
    static char body[16384];
    strbuf t = {body, sizeof body, 0};
    put_paragraphs(&t, c, c->about, ROFF);
    fputs(".SH SYNOPSIS\n", out);
    roff(out, c, c->usage);
    fprintf(out, "\n.SH DESCRIPTION\n%s\n", body);
    for (int i = 0; i < c->nargs; i++) {
        fprintf(out, "%s.TP\n.B ", i == 0 ? ".SH ARGUMENTS\n" : "");
        roff_code(out, c->args[i].name);
        fputs("\n", out);
        roff(out, c, c->args[i].help);
        fputs("\n", out);
    }
    fputs(".SH OPTIONS\n", out);
    for (int i = 0; i < c->noptions; i++) {
        const dp_option *o = &c->options[i];
        const char *heading;
        char value[256];
        if (!listed(c, i, &heading))
            continue;
        if (heading) {
            fputs(".SS ", out);
            roff(out, c, heading);
            fputs("\n", out);
        }
        fputs(".TP\n.B ", out);
        roff_code(out, o->flag);
        if (o->metavar) {
            fputs(" \\fI", out);
            roff_code(out, o->metavar);
            fputs("\\fR", out);
        }
        fputs("\n", out);
        roff(out, c, o->help);
        if (!own_default(o->help)) {
            fputs(" [", out);
            roff(out, c, default_of(c, o, value, sizeof value));
            fputs("]", out);
        }
        fputs("\n", out);
    }
    fputs(".SH SEE ALSO\n\\fBdptrain\\fR(1)\n", out);
}
