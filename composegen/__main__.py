from composegen.cli.entry import main

main()
