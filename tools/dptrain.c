/* Placeholder: replaced by the real command line. */
int main(void)
{
    return 0;
}
