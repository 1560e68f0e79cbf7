from composegen.cli import main

main()
